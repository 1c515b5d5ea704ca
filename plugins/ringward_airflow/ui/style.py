"""The pages' one stylesheet, inlined in each page (no download, nothing from elsewhere): Airflow 3's look
(its system font stack, 14 px text, quiet tables, state badges in the colours of Airflow's state tokens, which
are Tailwind's palette), light and dark.

Dark follows `prefers-color-scheme`, unless Airflow's own choice is known: the page, shown by Airflow in a
frame of its UI, reads the theme Airflow stores (localStorage `theme`, next-themes) or the `dark`/`light` class
on Airflow's document, and sets `data-theme` on its own `<html>` (`THEME_SCRIPT`; without script, the system
setting decides). The pictures keep a light card behind them, so their own colours read in both themes.
Rules for the page's own elements name the element (`div.bar`): an SVG's shapes share class names (`bar`) and
CSS `width`/`height` would resize them."""

from __future__ import annotations

import base64
import hashlib

__all__ = ["STATE_CLASSES", "STYLESHEET", "THEME_SCRIPT", "THEME_SCRIPT_HASH", "state_class"]

# Airflow 3's state tokens (ui/src/theme.ts), as Tailwind 600 shades: every badge is white on that colour.
_STATE_COLOURS = {
    "success": "#16a34a",  # green
    "failed": "#dc2626",  # red
    "running": "#0891b2",  # cyan
    "queued": "#78716c",  # stone
    "scheduled": "#71717a",  # zinc
    "skipped": "#db2777",  # pink
    "up_for_retry": "#ca8a04",  # yellow
    "up_for_reschedule": "#0284c7",  # sky
    "upstream_failed": "#d97706",  # amber
    "restarting": "#7c3aed",  # violet
    "deferred": "#9333ea",  # purple
    "awaiting_input": "#ea580c",  # orange
    "removed": "#64748b",  # slate
    "none": "#6b7280",  # gray
}

# ringward's own words for states, as the Airflow state whose colour they take.
STATE_CLASSES = {
    "done": "success", "ok": "success", "up": "success", "passed": "success", "in sync": "success",
    "error": "failed", "down": "failed", "not in sync": "upstream_failed", "postponed": "up_for_reschedule",
    "pending": "none", "paused": "upstream_failed", "unknown": "none",
}  # fmt: skip


def state_class(state: str) -> str:
    """The badge class of a state: Airflow's states as they are, ringward's (done, pending...) as their kin."""
    key = state.strip().lower()
    key = STATE_CLASSES.get(key, key)
    return f"state-{key}" if key in _STATE_COLOURS else "state-none"


_LIGHT = """--bg:#ffffff;--fg:#18181b;--muted:#71717a;--border:#e4e4e7;--subtle:#f4f4f5;--header:#fafafa;
--link:#0369a1;--accent:#017cee;--ok:#15803d;--bad:#b91c1c;--warn:#b45309;--affected:#fff7ed;--hover:#fafafa;
--msg-bg:#fef2f2;--msg-border:#fecaca;--code:#f4f4f5;--card:#ffffff;--bar:#e4e4e7;color-scheme:light;"""

_DARK = """--bg:#111113;--fg:#f4f4f5;--muted:#a1a1aa;--border:#2e2e33;--subtle:#1c1c20;--header:#18181b;
--link:#7dd3fc;--accent:#3b9cf5;--ok:#4ade80;--bad:#f87171;--warn:#fbbf24;--affected:rgba(234,88,12,.14);
--hover:#1a1a1e;--msg-bg:rgba(220,38,38,.12);--msg-border:#7f1d1d;--code:#1c1c20;--card:#f4f4f5;--bar:#3f3f46;
color-scheme:dark;"""

_BADGES = "".join(f".badge.state-{state}{{background:{colour}}}" for state, colour in _STATE_COLOURS.items())

STYLESHEET = (
    f":root{{{_LIGHT}}}"
    f"@media (prefers-color-scheme: dark){{:root:not([data-theme=light]){{{_DARK}}}}}"
    f":root[data-theme=dark]{{{_DARK}}}"
    """
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font-size:14px;line-height:1.5;
font-family:Inter,ui-sans-serif,system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
a{color:var(--link);text-decoration:none} a:hover{text-decoration:underline}
nav{display:flex;gap:18px;align-items:center;padding:10px 24px;border-bottom:1px solid var(--border);
background:var(--header);font-size:14px}
nav b{font-weight:700;letter-spacing:.02em;margin-right:6px}
main{padding:16px 24px 40px;max-width:1400px}
h1{font-size:22px;font-weight:600;margin:8px 0 12px} h2{font-size:17px;font-weight:600;margin:28px 0 8px;
padding-bottom:4px;border-bottom:1px solid var(--border)} h3{font-size:15px;font-weight:600;margin:20px 0 6px}
p{margin:6px 0} code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
code{background:var(--code);padding:1px 5px;border-radius:4px}
pre{background:var(--code);border:1px solid var(--border);border-radius:6px;padding:10px 12px;white-space:pre-wrap}
table{border-collapse:separate;border-spacing:0;margin:8px 0;border:1px solid var(--border);border-radius:8px;
overflow:hidden;font-variant-numeric:tabular-nums;max-width:100%}
td,th{padding:6px 12px;text-align:left;vertical-align:top;border-bottom:1px solid var(--border)}
th{background:var(--subtle);font-weight:600;font-size:13px;color:var(--fg);white-space:nowrap}
tbody tr:last-child td{border-bottom:0} tbody tr:hover td{background:var(--hover)}
tr.affected td{background:var(--affected)} td ul{margin:0;padding-left:18px}
.ok{color:var(--ok)} .bad{color:var(--bad);font-weight:600} .warn{color:var(--warn)} .muted{color:var(--muted)}
.badge{display:inline-block;padding:1px 8px;border-radius:9999px;font-size:12px;font-weight:500;line-height:18px;
color:#fff;background:#6b7280;white-space:nowrap}
"""
    + _BADGES
    + """
div.bar{width:420px;max-width:100%;height:10px;background:var(--bar);border-radius:9999px;overflow:hidden;
margin:4px 0 8px}
div.fill{height:100%;background:var(--accent);border-radius:9999px}
.msg{padding:10px 14px;border:1px solid var(--msg-border);background:var(--msg-bg);border-radius:8px}
.svg{display:inline-block;max-width:100%;overflow:auto;background:var(--card);color:#18181b;
border:1px solid var(--border);border-radius:8px;padding:8px;margin:8px 0}
.svg svg{max-width:100%;height:auto;display:block} .svg a{color:#0369a1} .svg .muted{color:#52525b}
.summary{color:var(--muted)} .summary b{color:var(--fg)}
details{margin:6px 0} summary{cursor:pointer;color:var(--link)}
.pager{color:var(--muted)}
form{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin:10px 0;padding:12px;border:1px solid
var(--border);border-radius:8px;background:var(--subtle)}
input[type=text],input:not([type]){background:var(--bg);color:var(--fg);border:1px solid var(--border);
border-radius:6px;padding:5px 8px;font:inherit}
button{font:inherit;font-weight:600;color:#fff;background:var(--accent);border:0;border-radius:6px;padding:6px 14px;
cursor:pointer} button:hover{filter:brightness(1.1)}
button:focus-visible,input:focus-visible,a:focus-visible,summary:focus-visible{outline:2px solid var(--accent);
outline-offset:2px}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:8px 0}
dl.facts dt{color:var(--muted)} dl.facts dd{margin:0}
"""
)

# Airflow's theme, when the page can see it (same origin): its stored choice, or the class on its document.
THEME_SCRIPT = (
    "try{var t=localStorage.getItem('theme'),p=window.parent!==window&&window.parent.document.documentElement"
    ".classList;if(p&&p.contains('dark'))t='dark';else if(p&&p.contains('light'))t='light';"
    "if(t==='dark'||t==='light')document.documentElement.setAttribute('data-theme',t)}catch(e){}"
)

# The Content-Security-Policy source that allows exactly this script inline, and no other (`app.py`).
THEME_SCRIPT_HASH = "'sha256-" + base64.b64encode(hashlib.sha256(THEME_SCRIPT.encode()).digest()).decode() + "'"
