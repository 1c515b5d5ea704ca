"""Screenshots of the three ringward pages for the README (docs/ui/*.png).

The pages are rendered by the plugin's own code (views + pages) from the example data set of the UI unit
tests (a real plan of a 5-node ring moving SimpleStrategy RF 1 to NetworkTopologyStrategy dc1: 3, a journal
part-way through, a nightly run half done with one failing segment), then photographed by headless Chromium.
Run: .venv/bin/python tools/ui_screenshots.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in ("include", "plugins", "tests", "tests/unit"):
    sys.path.insert(0, str(ROOT / folder))

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]  # fmt: skip


def main() -> None:
    import test_ui_plugin as example
    from ringward_airflow.ui import pages
    from ringward_airflow.ui.views import cluster_view, migration_view, repair_view

    world = example._world()
    migration, placement = migration_view(world, "keyspace_migration", example.RUN_ID)
    repair, coverage = repair_view(world)
    cluster, ring = cluster_view(world)
    rendered = {
        "migration": (pages.migration_page(migration, placement), 2600),
        "repair": (pages.repair_page(repair, coverage), 1500),
        "cluster": (pages.cluster_page(cluster, ring), 900),
    }
    out = ROOT / "docs" / "ui"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (html, height) in rendered.items():
            page = Path(tmp) / f"{name}.html"
            page.write_text(html, encoding="utf-8")
            target = out / f"{name}.png"
            subprocess.run(
                ["/usr/bin/chromium", *FLAGS, f"--user-data-dir={tmp}/profile", f"--window-size=1280,{height}",
                 f"--screenshot={target}", page.as_uri()],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            print(f"wrote {target}")


if __name__ == "__main__":
    main()
