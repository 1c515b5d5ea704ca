"""The FastAPI app of the ringward plugin, mounted by Airflow's API server under /ringward.

Airflow does not authenticate plugin apps: every route here depends on Airflow's own security dependencies
(the JWT of the `_token` cookie or an `Authorization: Bearer` header, checked by the configured auth manager),
and on a permission:
  - migration pages: read access to the runs of the DAG in the URL (a migration DAG; the record served is the
    one that DAG's run in the URL owns); what the page shows of the run's XComs and task instances needs read
    access to those too, as in Airflow's own API;
  - repair page: read access to the runs of the cluster's nightly repair DAG; the pause switch: edit access;
  - cluster page: read access to the cluster's Cassandra connection (it shows where the connection points) and
    to the runs of one of the cluster's DAGs.

Clusters: the pages serve every cluster the clusters file declares (the same declarations the DAG factory builds
the DAGs from: `ringward_airflow.cluster_declarations`), each with its own connection and DAG ids. The Repair and
Cluster pages name theirs as `?cluster=<name>` (several declared and none named: a page redirects to the first one
the user may open, JSON and pictures answer 422 naming them); a Migration page's cluster is its DAG's. Without a
clusters file there is the single cluster, `cassandra_default` and today's DAG ids, at today's URLs. The picker
lists only the clusters whose page the user may open (`/api/clusters` lists them as data); a cluster the user may
not open is refused (403) like any page.

What the pages show of a DAG run (its state, task instances, XComs) is read through Airflow's REST API with the
viewer's own token (`airflow_reads.py`), so Airflow's per-DAG authorization applies to it as to Airflow's own UI.

A browser sends the `_token` cookie with every request to this host, also one a page of another port makes
(same-site): a change made with the cookie is accepted only from the app's own pages (`_same_origin_writes`).

Every response of the app (page, JSON, SVG, error) carries the same security headers (`SecurityHeaders`, the one
place they are set): a Content-Security-Policy that runs no script but the pages' hashed theme line and lets only
Airflow's own pages frame them, `X-Content-Type-Options: nosniff`, and `Cache-Control: no-store`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails, DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.security.utils import get_authorization_scheme_param
from ringward.clusters import ClusterTarget
from ringward.errors import ConfigurationError, RingwardError
from ringward.text import log_safe
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ringward_airflow.cluster_declarations import page_clusters
from ringward_airflow.ui import pages
from ringward_airflow.ui.airflow_reads import AirflowAccessRefused, ApiRunReader, dag_team_name
from ringward_airflow.ui.source import (
    CassandraSource,
    ConnectionSettingError,
    Source,
    drop_sessions,
    unreachable,
)
from ringward_airflow.ui.style import THEME_SCRIPT_HASH
from ringward_airflow.ui.views import (
    JSON_ROWS,
    RunAccess,
    StoredStateError,
    Window,
    cluster_view,
    migration_view,
    repair_view,
)

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "SECURITY_HEADERS",
    "ClusterRefused",
    "SecurityHeaders",
    "cluster_of",
    "create_app",
    "may_open",
    "page_cluster",
]

log = logging.getLogger(__name__)

SVG = "image/svg+xml"

# Nothing is loaded from anywhere but this app; no script runs but the theme line (by its hash: no inline handler,
# no javascript: URL, no injected <script>); style is inline (the pages' one stylesheet and bar widths); the
# large placement picture is an <img> of this app; forms post to this app only; only Airflow's own pages (same
# origin) may frame the pages.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'",
    f"script-src {THEME_SCRIPT_HASH}",
    "style-src 'unsafe-inline'",
    "img-src 'self'",
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'self'",
])  # fmt: skip
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "SAMEORIGIN",  # frame-ancestors for browsers that predate it
    "cache-control": "no-store",  # run data, settings and names: kept by no cache, shared or the browser's
}


def _warn(message: str, *args: object) -> None:
    """A warning in the API server's log; every argument (user input, names from the cluster or the store,
    error texts quoting them) on one line, its control characters escaped (`log_safe`)."""
    log.warning(message, *(log_safe(a) if isinstance(a, str | BaseException) else a for a in args))


class SecurityHeaders:
    """ASGI middleware: every response of the app, whatever route, error or exception handler made it, leaves with
    `SECURITY_HEADERS` (replacing any of them a route set)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.encode("latin-1") for name in SECURITY_HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                added = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": kept + added}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# -- the clusters, and who may open which -------------------------------------------------------------------


class ClusterRefused(RingwardError):
    """The cluster a request names cannot be served: not declared (404), none named where several are declared
    (422), the clusters file unusable (500); `location`: where a page without a cluster goes instead (303)."""

    def __init__(self, problem: str, fix: str = "", *, status: int, location: str | None = None) -> None:
        super().__init__(problem, fix)
        self.status = status
        self.location = location


def _may_read_runs(user: Any, dag_id: str, method: str = "GET") -> bool:
    """The auth manager's answer for the runs of `dag_id`, as Airflow's own `requires_access_dag` asks it."""
    from airflow.api_fastapi.app import get_auth_manager

    details = DagDetails(id=dag_id, team_name=dag_team_name(dag_id))
    return bool(get_auth_manager().is_authorized_dag(method=method, access_entity=DagAccessEntity.RUN,  # type: ignore[arg-type]
                                                     details=details, user=user))  # fmt: skip


def _may_read_connection(user: Any, conn_id: str) -> bool:
    from airflow.api_fastapi.app import get_auth_manager

    details = ConnectionDetails(conn_id=conn_id)
    return bool(get_auth_manager().is_authorized_connection(method="GET", details=details, user=user))


def may_open(user: Any, cluster: ClusterTarget, kind: str) -> bool:
    """Whether `user` may open the `kind` page of `cluster`: "repair" (read its repair DAG's runs), "repair_edit"
    (edit them: the pause switch), "cluster" (read its connection and the runs of one of its DAGs), "migration"
    (read the runs of one of its migration DAGs; the route checks the run's own DAG)."""
    if kind == "repair":
        return _may_read_runs(user, cluster.repair_dag)
    if kind == "repair_edit":
        return _may_read_runs(user, cluster.repair_dag, "PUT")
    if kind == "cluster":
        return _may_read_connection(user, cluster.cassandra_conn_id) and any(
            _may_read_runs(user, dag) for dag in cluster.dags
        )
    if kind == "migration":
        return any(_may_read_runs(user, dag) for dag in cluster.migration_dags)
    raise ValueError(f"no page kind {kind!r}")


def _clusters(request: Request) -> tuple[ClusterTarget, ...]:
    """The clusters the app serves (the factory it was created with, read per request: the file may change)."""
    try:
        return tuple(request.app.state.clusters())
    except ConfigurationError as error:
        raise ClusterRefused(f"ringward's clusters file cannot be used: {error.problem}", error.fix,
                             status=500) from error  # fmt: skip


def _chosen(request: Request, user: Any, kind: str, clusters: tuple[ClusterTarget, ...], named: str | None
            ) -> ClusterTarget:  # fmt: skip
    dag_id = request.path_params.get("dag_id")
    if dag_id is not None:  # a Migration page: its DAG is one cluster's
        for cluster in clusters:
            if dag_id in cluster.migration_dags:
                return cluster
        if len(clusters) == 1:  # the page says the DAG is not one of the cluster's migration DAGs (no read)
            return clusters[0]
        raise ClusterRefused(
            f"{dag_id} is not the migration or rollback DAG of any declared cluster.",
            "Open the Migration page from a run of a keyspace_migration__<cluster> or "
            "keyspace_migration_rollback__<cluster> DAG.",
            status=404,
        )
    if named:
        for cluster in clusters:
            if cluster.name == named:
                return cluster
        declared = [c.name for c in clusters if c.name is not None]
        raise ClusterRefused(
            f"No cluster named “{named}” is declared.",  # as given: the page escapes it, the log escapes it
            "Pick a cluster from the page's list of clusters" + ("." if declared else
                                                                  ": this deployment has one cluster, served "
                                                                  "without ?cluster=."),
            status=404,
        )  # fmt: skip
    if len(clusters) == 1:
        return clusters[0]
    allowed = [c.name for c in clusters if c.name is not None and may_open(user, c, kind)]
    if not allowed:
        raise HTTPException(403, "Forbidden")
    if request.method == "GET" and "/api/" not in request.url.path:  # a page: the first cluster the user may open
        raise ClusterRefused("", status=303, location=f"?cluster={quote(allowed[0], safe='')}")
    raise ClusterRefused(
        f"Several clusters are declared and this request names none of them (you may open: {', '.join(allowed)}).",
        "Add ?cluster=<name> to the URL.",
        status=422,
    )


def page_cluster(kind: str) -> Callable[..., ClusterTarget]:
    """A route's dependency: the request's cluster (`?cluster=`, a Migration page's DAG, or the only one), refused
    (403) unless the user may open its `kind` page (`may_open`). Kept in `request.state` for the source and the
    other dependencies of the request (`cluster_of`)."""

    def dependency(request: Request, user: GetUserDep, cluster: Annotated[str | None, Query()] = None
                   ) -> ClusterTarget:  # fmt: skip
        chosen = _chosen(request, user, kind, _clusters(request), cluster)
        # A Migration page's DAG (in the path) is checked by Airflow's own `requires_access_dag` first: it is the
        # cluster's migration DAG, or (single cluster) one whose page reads nothing and says it is none.
        if kind != "migration" and not may_open(user, chosen, kind):
            raise HTTPException(403, "Forbidden")
        request.state.ringward_cluster = chosen
        return chosen

    return dependency


def cluster_of(request: Request) -> ClusterTarget:
    """The cluster the route's `page_cluster` dependency chose for this request."""
    chosen = getattr(request.state, "ringward_cluster", None)
    if not isinstance(chosen, ClusterTarget):  # a route without `page_cluster`: a bug, not the user's request
        raise RuntimeError(f"{request.url.path}: the route does not choose a cluster (page_cluster)")
    return chosen


ClusterDep = Annotated[ClusterTarget, Depends(cluster_of)]


def _visible(request: Request, user: Any, kind: str) -> list[str]:
    """The names of the declared clusters whose `kind` page the user may open: the picker (none without a clusters
    file: the single cluster needs no picker)."""
    return [c.name for c in _clusters(request) if c.name is not None and may_open(user, c, kind)]


def _reads_connection(request: Request, user: GetUserDep) -> bool:
    """Whether the user may read the request's cluster's Cassandra connection (and so see where it points)."""
    return _may_read_connection(user, cluster_of(request).cassandra_conn_id)


# Whether an error may name the connection's hosts to this user: only to one who may read the connection.
ConnectionReaderDep = Annotated[bool, Depends(_reads_connection)]


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str | None) -> str | None:
    """`scheme://host[:port]` of a URL, the default port left out (as browsers send Origin); None if not one."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    netloc = parts.hostname if port in (None, _DEFAULT_PORTS[parts.scheme]) else f"{parts.hostname}:{port}"
    return f"{parts.scheme}://{netloc}"


def _own_origins(request: Request) -> set[str]:
    """The app's origin as this request reached it, and as [api] base_url names it (behind a proxy)."""
    from airflow.configuration import conf

    own = {_origin(str(request.url)), _origin(conf.get("api", "base_url", fallback=""))}
    return {o for o in own if o}


def _same_origin_writes(request: Request) -> None:
    """CSRF: a change authenticated by the cookie must come from this app's own pages.

    The browser says where a request comes from: Sec-Fetch-Site (set by the browser itself, so right behind any
    proxy), else Origin, else Referer; a cookie-authenticated change without any of them is refused too. A call
    with `Authorization: Bearer` cannot be made by another page (it holds no token) and is not checked."""
    if request.method in SAFE_METHODS:
        return
    scheme, credentials = get_authorization_scheme_param(request.headers.get("authorization"))
    if scheme.lower() == "bearer" and credentials:  # as Airflow's get_user: a bearer token wins over the cookie
        return
    if COOKIE_NAME_JWT_TOKEN not in request.cookies:
        return  # not authenticated by the cookie: Airflow's own check refuses it (401)
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site in ("same-origin", "none"):  # "none": the user's own navigation
            return
        sender = f"a {fetch_site} page ({request.headers.get('origin') or 'origin not sent'})"
    else:
        sender_origin = _origin(request.headers.get("origin")) or (
            None if "origin" in request.headers else _origin(request.headers.get("referer"))
        )
        if sender_origin is not None and sender_origin in _own_origins(request):
            return
        sender = sender_origin or request.headers.get("origin") or "a page that sent neither Origin nor Referer"
    own = " or ".join(sorted(_own_origins(request)))
    _warn("Refused %s %s by cookie from %s (this app: %s)", request.method, request.url.path, sender, own)
    raise HTTPException(
        403,
        f"Refused: this change was sent from {sender}, not from ringward's own page ({own}), so it may have been "
        "made by another site in your browser's name. Use the form on the ringward page itself; a script should "
        "send its token as 'Authorization: Bearer …' instead of the cookie. Behind a proxy that changes the Host "
        "header, set [api] base_url to the address browsers use.",
    )


def _run_access(request: Request, user: GetUserDep) -> RunAccess:
    """What the user may read of the URL's DAG run besides the run: its XComs, its task instances."""
    from airflow.api_fastapi.app import get_auth_manager

    dag_id = request.path_params["dag_id"]
    details = DagDetails(id=dag_id, team_name=dag_team_name(dag_id))

    def may_read(entity: DagAccessEntity) -> bool:
        return bool(get_auth_manager().is_authorized_dag(method="GET", access_entity=entity, details=details,
                                                         user=user))  # fmt: skip

    return RunAccess(xcoms=may_read(DagAccessEntity.XCOM), task_instances=may_read(DagAccessEntity.TASK_INSTANCE))


RunAccessDep = Annotated[RunAccess, Depends(_run_access)]
# The DAG in the path (Airflow's own check), then its cluster.
MIGRATION_READ = [Depends(requires_access_dag("GET", DagAccessEntity.RUN)), Depends(page_cluster("migration"))]
REPAIR_READ = [Depends(page_cluster("repair"))]
REPAIR_EDIT = [Depends(page_cluster("repair_edit"))]
CLUSTER_READ = [Depends(page_cluster("cluster"))]


def viewer_source(request: Request) -> Source:
    """The real source of a request: the request's cluster (its Cassandra connection, `cluster_of`), and Airflow's
    runs as its viewer may read them (Airflow's REST API, in process, with the viewer's token)."""
    return CassandraSource(ApiRunReader.for_request(request), cluster_of(request).cassandra_conn_id)


def _source(request: Request) -> Iterator[Source]:
    """The request's `Source`, from the factory the app was created with (called with the request; the request's
    cluster is `cluster_of(request)`)."""
    conn_id = cluster_of(request).cassandra_conn_id
    try:
        opened = request.app.state.source_factory(request)
    except ConnectionSettingError as error:  # defined, but with a setting the driver cannot take
        raise HTTPException(503, f"The Cassandra connection {conn_id!r} cannot be used: {error}") from error
    except Exception as error:  # e.g. the connection is not defined: say which and how to fix it
        raise HTTPException(
            503,
            f"The Cassandra connection {conn_id!r} cannot be read: {error}. Define it under Admin → "
            "Connections (type cassandra, host: the nodes' addresses, port: their CQL port).",
        ) from error
    try:
        yield opened
    finally:
        opened.close()


SourceDep = Annotated[Source, Depends(_source)]


def create_app(
    source_factory: Callable[[Request], Source] = viewer_source,
    clusters: Callable[[], tuple[ClusterTarget, ...]] = page_clusters,
) -> FastAPI:
    """The app; `source_factory` opens a `Source` per request, given the request (tests pass an in-memory one);
    `clusters` gives the clusters served, read per request (default: the declarations the DAGs are built from)."""
    # Every route, present and future: a change by cookie is checked before its own dependencies run.
    app = FastAPI(title="ringward", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[Depends(_same_origin_writes)])  # fmt: skip
    app.state.source_factory = source_factory
    app.state.clusters = clusters
    app.add_middleware(SecurityHeaders)

    @app.exception_handler(ClusterRefused)
    async def cluster_refused(request: Request, error: ClusterRefused) -> Response:
        if error.location is not None:
            return RedirectResponse(error.location, status_code=error.status)
        _warn("%s", error)
        if "/api/" in request.url.path:
            return JSONResponse({"error": "cluster", "detail": str(error)}, status_code=error.status)
        root = "../../" if "/migration/" in request.url.path else ""
        return HTMLResponse(pages.error_page("Cluster", str(error), root=root), status_code=error.status)

    def guarded(build: Callable[[], Any], title: str, *, as_json: bool, hosts_shown: bool, root: str = "",
                cluster: ClusterTarget | None = None) -> Any:  # fmt: skip
        """Run `build`; an unreachable cluster becomes a 503 with a message saying so (page or JSON).

        `hosts_shown`: whether the user may read the connection; the driver's error names the hosts it tried,
        so only such a user sees it (the log has it for everyone else's look)."""
        started = time.monotonic()
        conn_id = (cluster or ClusterTarget()).cassandra_conn_id
        try:
            return build()
        except AirflowAccessRefused as error:  # Airflow's API refused the viewer the run: the page's access error
            _warn("%s", error)
            if as_json:
                return JSONResponse({"error": "forbidden", "detail": str(error)}, status_code=error.status)
            return HTMLResponse(pages.error_page(title, str(error), root=root), status_code=error.status)
        except StoredStateError as error:  # a row of ringward_ops this ringward cannot read: which, and the fix
            _warn("%s", error)
            if as_json:
                return JSONResponse({"error": "stored_state", "detail": str(error)}, status_code=409)
            return HTMLResponse(pages.error_page(title, str(error), root=root), status_code=409)
        except ConnectionSettingError as error:  # raised here only if the source did not check it first
            problem = f"The Cassandra connection {conn_id!r} cannot be used: {error}"
            if as_json:
                return JSONResponse({"error": "connection", "detail": problem}, status_code=503)
            return HTMLResponse(pages.error_page(title, problem, root=root), status_code=503)
        except ConfigurationError as error:  # e.g. $RINGWARD_REPAIR_CONFIG names a file that cannot be read
            problem = f"ringward's configuration cannot be used: {error}"
            _warn("%s", problem)
            if as_json:
                return JSONResponse({"error": "configuration", "detail": problem}, status_code=500)
            return HTMLResponse(pages.error_page(title, problem, root=root), status_code=500)
        except Exception as error:
            if not unreachable(error):
                raise
            drop_sessions()
            problem = f"The Cassandra cluster cannot be reached: {error}"
            _warn("%s (after %.1f s)", problem, time.monotonic() - started)
            if not hosts_shown:
                problem = (
                    f"The Cassandra cluster cannot be reached: no node of the connection {conn_id!r} answered. "
                    "Which nodes were tried is shown to users who may read that connection (the Cluster page), "
                    "and is in the API server's log."
                )
            if as_json:
                return JSONResponse({"error": "cluster_unreachable", "detail": problem}, status_code=503)
            return HTMLResponse(pages.error_page(title, problem, root=root), status_code=503)

    # -- the clusters ---------------------------------------------------------------------------------
    @app.get("/api/clusters")
    def clusters_json(request: Request, user: GetUserDep) -> Any:
        """The clusters the user may open a page of, and which pages: the pickers' lists, as data. Without a
        clusters file: the single cluster (name null)."""
        listed = []
        for cluster in _clusters(request):
            pages_ = {kind: may_open(user, cluster, kind) for kind in ("repair", "cluster", "migration")}
            if any(pages_.values()):
                listed.append({"name": cluster.name, "dags": list(cluster.dags), "pages": pages_})
        return JSONResponse({"clusters": listed})

    # -- migration ------------------------------------------------------------------------------------
    @app.get("/migration/{dag_id}/{run_id}", response_class=HTMLResponse, dependencies=MIGRATION_READ)
    def migration_html(
        dag_id: str,
        run_id: str,
        src: SourceDep,
        access: RunAccessDep,
        hosts: ConnectionReaderDep,
        cluster: ClusterDep,
        page: Annotated[int, Query()] = 1,
    ) -> Any:
        window = _page_window(page)

        def build() -> Any:
            data, svg = migration_view(src, dag_id, run_id, access=access, window=window, cluster=cluster)
            return HTMLResponse(pages.migration_page(data, svg))

        return guarded(build, f"Migration of run {run_id}", as_json=False, hosts_shown=hosts, root="../../",
                       cluster=cluster)  # fmt: skip

    @app.get("/api/migration/{dag_id}/{run_id}", dependencies=MIGRATION_READ)
    def migration_json(
        dag_id: str,
        run_id: str,
        src: SourceDep,
        access: RunAccessDep,
        hosts: ConnectionReaderDep,
        cluster: ClusterDep,
        offset: Annotated[int, Query()] = 0,
        limit: Annotated[int, Query()] = JSON_ROWS,
    ) -> Any:
        """The migration's data; each list of ranges (the plan's, each repair stage's) from row `offset`, at
        most `limit` rows, in ring order (`ranges_total` and each stage's `total` count them all)."""
        window = _json_window(offset, limit)
        return guarded(lambda: JSONResponse(_jsonable(migration_view(src, dag_id, run_id, access=access,
                                                                     window=window, cluster=cluster)[0])),
                       "", as_json=True, hosts_shown=hosts, cluster=cluster)  # fmt: skip

    @app.get("/api/migration/{dag_id}/{run_id}/placement.svg", dependencies=MIGRATION_READ)
    def migration_svg(dag_id: str, run_id: str, src: SourceDep, hosts: ConnectionReaderDep, cluster: ClusterDep
                      ) -> Any:  # fmt: skip
        def build() -> Any:
            nothing = RunAccess(xcoms=False, task_instances=False)
            _, svg = migration_view(src, dag_id, run_id, access=nothing, window=Window(limit=0), cluster=cluster)
            if svg is None:
                raise HTTPException(404, f"No ringward migration is recorded for run {run_id} of {dag_id}.")
            return Response(svg, media_type=SVG)

        return guarded(build, "", as_json=True, hosts_shown=hosts, cluster=cluster)

    # -- repair ---------------------------------------------------------------------------------------
    # The repair page reads what the nightly repair stored (its reports and live progress): no planning, no
    # history scan, so the page's 15 s reload costs a few small reads whatever the cluster's size.
    # Its lists of tables are paged (?page=N; the JSON: ?offset=&limit=).
    @app.get("/repair", response_class=HTMLResponse, dependencies=REPAIR_READ)
    def repair_html(request: Request, user: GetUserDep, src: SourceDep, hosts: ConnectionReaderDep,
                    cluster: ClusterDep, page: Annotated[int, Query()] = 1) -> Any:  # fmt: skip
        window = _page_window(page)
        picker = _visible(request, user, "repair")

        def build() -> Any:
            data, svg = repair_view(src, window, cluster)
            return HTMLResponse(pages.repair_page(data, svg, picker=picker))

        return guarded(build, "Nightly subrange repair", as_json=False, hosts_shown=hosts, cluster=cluster)

    @app.get("/api/repair", dependencies=REPAIR_READ)
    def repair_json(src: SourceDep, hosts: ConnectionReaderDep, cluster: ClusterDep,
                    offset: Annotated[int, Query()] = 0,
                    limit: Annotated[int, Query()] = JSON_ROWS) -> Any:  # fmt: skip
        window = _json_window(offset, limit)
        return guarded(lambda: JSONResponse(_jsonable(repair_view(src, window, cluster)[0])), "", as_json=True,
                       hosts_shown=hosts, cluster=cluster)  # fmt: skip

    @app.get("/api/repair/coverage.svg", dependencies=REPAIR_READ)
    def repair_svg(src: SourceDep, hosts: ConnectionReaderDep, cluster: ClusterDep,
                   page: Annotated[int, Query()] = 1) -> Any:  # fmt: skip
        """The tables of the Repair page's page `page` (the picture it inlines)."""
        window = _page_window(page)
        return guarded(lambda: Response(repair_view(src, window, cluster)[1], media_type=SVG), "", as_json=True,
                       hosts_shown=hosts, cluster=cluster)  # fmt: skip

    @app.post("/api/repair/switch", dependencies=REPAIR_EDIT)
    def repair_switch(
        request: Request,
        user: GetUserDep,
        src: SourceDep,
        hosts: ConnectionReaderDep,
        cluster: ClusterDep,
        action: Annotated[str, Form()],
        confirm: Annotated[str, Form()] = "",
        reason: Annotated[str, Form()] = "",
    ) -> Any:
        """Pause or resume the cluster's nightly repair between segments; the press is recorded with the user's
        name."""
        if action not in ("pause", "resume"):
            raise HTTPException(422, f"action must be 'pause' or 'resume', not {action!r}.")
        if confirm != "yes":
            raise HTTPException(422, "Confirm the switch: send confirm=yes (the page's checkbox).")

        def build() -> Any:
            store = src.ops()
            if store is None:
                raise HTTPException(
                    409,
                    "ringward_ops does not exist on this cluster: no nightly repair has run here, so there is "
                    "nothing to pause. Run the repair DAG once first.",
                )
            event = store.set_switch(action == "pause", user.get_name(), reason)
            _warn("Nightly repair %s%s by %s (%s)", "PAUSED" if event.paused else "resumed",
                  "" if cluster.name is None else f" of cluster {cluster.name}", event.changed_by, reason)  # fmt: skip
            if "text/html" in request.headers.get("accept", ""):
                return RedirectResponse("../../repair" + pages.cluster_query(cluster.name), status_code=303)
            return JSONResponse({"paused": event.paused, "changed_by": event.changed_by,
                                 "changed_at": event.changed_at.isoformat() if event.changed_at else None,
                                 "reason": event.reason})  # fmt: skip

        return guarded(build, "", as_json=True, hosts_shown=hosts, cluster=cluster)

    # -- cluster --------------------------------------------------------------------------------------
    # Its list of nodes is paged (?page=N; the JSON: ?offset=&limit=); its ring picture is bounded in size.
    @app.get("/cluster", response_class=HTMLResponse, dependencies=CLUSTER_READ)
    def cluster_html(request: Request, user: GetUserDep, src: SourceDep, cluster: ClusterDep,
                     page: Annotated[int, Query()] = 1) -> Any:  # fmt: skip
        window = _page_window(page)
        picker = _visible(request, user, "cluster")

        def build() -> Any:
            data, svg = cluster_view(src, window, cluster)
            return HTMLResponse(pages.cluster_page(data, svg, picker=picker))

        # CLUSTER_READ: the user reads the connection
        return guarded(build, "Cluster", as_json=False, hosts_shown=True, cluster=cluster)

    @app.get("/api/cluster", dependencies=CLUSTER_READ)
    def cluster_json(src: SourceDep, cluster: ClusterDep, offset: Annotated[int, Query()] = 0,
                     limit: Annotated[int, Query()] = JSON_ROWS) -> Any:  # fmt: skip
        window = _json_window(offset, limit)
        return guarded(lambda: JSONResponse(_jsonable(cluster_view(src, window, cluster)[0])), "", as_json=True,
                       hosts_shown=True, cluster=cluster)  # fmt: skip

    @app.get("/api/cluster/ring.svg", dependencies=CLUSTER_READ)
    def cluster_svg(src: SourceDep, cluster: ClusterDep) -> Any:
        return guarded(lambda: Response(cluster_view(src, cluster=cluster)[1], media_type=SVG), "", as_json=True,
                       hosts_shown=True, cluster=cluster)  # fmt: skip

    return app


MAX_PAGE = 10_000  # pages of a list: 2,000,000 rows at the pages' 200 rows a page
MAX_OFFSET = 10_000_000  # the JSON's first row: beyond any ring's ranges


def _bounded(name: str, value: int, low: int, high: int) -> None:
    """Refuse a query parameter outside [low, high], naming the range (422: the request, not the server)."""
    if not low <= value <= high:
        raise HTTPException(422, f"Query parameter {name}={value} is out of range: it must be from {low} to {high}.")


def _page_window(page: int) -> Window:
    """The rows of a page's page `page` (1 the first; past the last: the last); refused out of range."""
    _bounded("page", page, 1, MAX_PAGE)
    return Window(offset=(page - 1) * pages.PAGE_ROWS, limit=pages.PAGE_ROWS, triage=True)


def _json_window(offset: int, limit: int) -> Window:
    """`limit` rows from row `offset` of each list of a JSON response; refused out of range."""
    _bounded("offset", offset, 0, MAX_OFFSET)
    _bounded("limit", limit, 1, JSON_ROWS)
    return Window(offset=offset, limit=limit)


def _jsonable(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value, default=str))
