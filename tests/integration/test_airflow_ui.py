"""One migration as a person does it in the Airflow UI, in a real (headless) Chromium: sign in, trigger
keyspace_migration from its form, approve it in Required Actions, watch the run succeed.

Debian's /usr/bin/chromium drives the pages (nothing is downloaded; `make test` installs it when missing). Each
step's screenshot is kept under .artifacts/screenshots/ (printed at the end).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from airflow_stack import PASSWORD, USER, AirflowStack
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.seed_scenario import create_seed_keyspace

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / ".artifacts" / "screenshots"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
DAG = "keyspace_migration"


@pytest.fixture
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)"
    with sync_playwright() as playwright, tempfile.TemporaryDirectory(prefix="ringward-chromium-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 900},
        )  # fmt: skip
        try:
            yield context.new_page()
        finally:
            context.close()


class Steps:
    def __init__(self, page: Any) -> None:
        self.page = page
        self.taken: list[Path] = []
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def shot(self, name: str) -> None:
        path = SCREENSHOTS / f"{len(self.taken) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)


def test_migration_triggered_and_approved_in_the_browser(
    seed_cluster: LocalCluster, airflow_stack: AirflowStack, page: Any
) -> None:
    from playwright.sync_api import expect

    keyspace = "from_the_ui"
    with connect(["127.0.0.2"]) as session:
        create_seed_keyspace(session, keyspace)
    airflow_stack.set_paused(DAG, True)  # the form's "unpause on trigger" does it, as for a new user
    before = {r["dag_run_id"] for r in airflow_stack.get(f"/dags/{DAG}/dagRuns").json()["dag_runs"]}
    steps = Steps(page)
    try:
        page.goto(f"{airflow_stack.url}/")
        page.locator("input[name=username]").fill(USER)
        page.locator("input[name=password]").fill(PASSWORD)
        steps.shot("sign-in")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/auth/login" not in url)

        page.goto(f"{airflow_stack.url}/dags/{DAG}")
        page.get_by_role("button", name="Trigger Dag").click()
        dialog = page.get_by_role("dialog")
        dialog.locator("input[name=element_keyspace]").fill(keyspace)
        # The target has no default either: typed into the form's JSON editor, as a person does.
        # Monaco loads after the dialog opens; a click before it has would select the page, not the editor
        # (on a busy 2-core CI machine the Trigger button then stayed disabled: the field was still empty).
        editor = dialog.locator("#element_replication")
        expect(editor.locator(".view-lines")).to_be_visible(timeout=60_000)
        editor.locator(".view-lines").click()
        page.keyboard.press("Control+A")
        page.keyboard.press("Delete")
        page.keyboard.insert_text(json.dumps({"class": "NetworkTopologyStrategy", "dc1": 2}))
        expect(editor).to_contain_text("NetworkTopologyStrategy")
        expect(dialog.locator("input[name=element_require_approval]")).to_be_checked()
        trigger = dialog.get_by_role("button", name="Trigger", exact=True)
        expect(trigger).to_be_enabled(timeout=30_000)
        steps.shot("trigger-form")
        trigger.click()
        expect(dialog).to_be_hidden(timeout=30_000)
        steps.shot("triggered")

        runs: list[str] = []

        def triggered() -> bool:
            listed = airflow_stack.get(f"/dags/{DAG}/dagRuns").json()["dag_runs"]
            runs[:] = [r["dag_run_id"] for r in listed if r["dag_run_id"] not in before]
            return bool(runs)

        airflow_stack.wait_until(triggered, 60, "the run triggered from the form")
        (run_id,) = runs
        conf = airflow_stack.run(DAG, run_id)["conf"]
        assert conf["keyspace"] == keyspace and conf["replication"] == {"class": "NetworkTopologyStrategy", "dc1": 2}

        # Required Actions lists the approval once the precheck has planned the change.
        subject = f"Approve the replication change of {keyspace}"
        airflow_stack.wait_until(lambda: bool(airflow_stack.pending_approvals(DAG, run_id)), 300,
                                 "the approval request", lambda: airflow_stack.describe(DAG, run_id))  # fmt: skip
        page.goto(f"{airflow_stack.url}/required_actions?response_received=false")
        link = page.get_by_role("link", name=subject)
        expect(link).to_be_visible(timeout=30_000)
        steps.shot("required-actions")
        link.click()
        approve = page.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_visible(timeout=30_000)
        steps.shot("approval-request")
        approve.click()
        expect(page.get_by_text("Approval Received").or_(page.get_by_text("response successful"))).to_be_visible(
            timeout=30_000
        )
        steps.shot("approved")

        run = airflow_stack.wait_for_state(DAG, run_id, {"success", "failed"}, timeout=900)
        page.goto(f"{airflow_stack.url}/dags/{DAG}/runs/{run_id}")
        expect(page.get_by_text("Success", exact=True).first).to_be_visible(timeout=30_000)
        steps.shot("run-succeeded")
        assert run["state"] == "success", airflow_stack.describe(DAG, run_id)

        # ringward's own pages, under the same Airflow login: the migration, the cluster, the repair.
        page.goto(f"{airflow_stack.url}/ringward/migration/{DAG}/{quote(run_id, safe='')}")
        expect(page.locator("#keyspace")).to_have_text(keyspace, timeout=30_000)
        moved = page.locator("#placement svg path.moved")
        expect(moved.first).to_be_attached()
        assert moved.count() == page.locator("#ranges tbody tr.affected").count() > 0
        expect(page.locator("p.stage").filter(has_text="repair:").first).to_contain_text("ranges done")
        steps.shot("migration-page")
        page.goto(f"{airflow_stack.url}/ringward/cluster")
        expect(page.locator("#nodes tbody tr")).to_have_count(3, timeout=30_000)
        expect(page.locator("#nodes")).to_contain_text("5.0.9")
        steps.shot("cluster-page")
        page.goto(f"{airflow_stack.url}/ringward/repair")
        expect(page.locator("#tables")).to_be_visible(timeout=30_000)
        steps.shot("repair-page")
    finally:
        steps.shot("last-page")
        print("screenshots:\n" + "\n".join(str(path) for path in steps.taken))
