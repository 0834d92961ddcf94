"""Operations tools: services, deployments, incidents, infrastructure, and data analysis."""

from __future__ import annotations

import ipaddress
import math
import re
import statistics

from prism_tools.examples._build import (
    LIMIT,
    REGIONS,
    SERVICES,
    Args,
    Draw,
    Spec,
    at_time,
    boolean,
    chance,
    choice,
    const,
    each_of,
    echo,
    fmt,
    group,
    ident,
    int_arg,
    integer,
    link,
    num_arg,
    number,
    numbers,
    on_day,
    person,
    pick,
    quoted,
    rint,
    rnum,
    rows,
    string,
    strings,
    text_arg,
    tool,
)
from prism_tools.types import JSONValue

SERVICE = string("service", "Service name, e.g. 'checkout'.", pattern="^[a-z][a-z0-9-]{1,62}$",
                 example="checkout")  # fmt: skip
ENVIRONMENT = choice("environment", "Target environment.", ("development", "staging", "production"))
INCIDENT_ID = string("incident_id", "Incident id, e.g. 'INC-3121'.", example="INC-3121")
DATABASE = string("database", "Database name.", example="orders")
VERSION = string("version", "Release version or git SHA.", example="v2.14.1")
SEVERITIES = ("sev1", "sev2", "sev3", "sev4")
# JSON Schema patterns are ECMA-262, which has no inline case flag: spell both cases out.
SELECT_ONLY = "^\\s*([Ss][Ee][Ll][Ee][Cc][Tt]|[Ww][Ii][Tt][Hh])\\s"


def run_database_migration(args: Args) -> JSONValue:
    """Apply schema migrations up to a target version (exclusive: nothing else may run)."""
    database = text_arg(args, "database")
    target = int_arg(args, "target_version")
    draw = Draw.seeded("schema", database)
    current = max(0, target - draw.integer(1, 4))
    steps = [
        {"version": version, "name": draw.sub(version).pick(
            ("add_index", "add_column", "backfill", "drop_legacy_table", "rename_column")),
         "duration_ms": draw.sub(f"t{version}").integer(40, 4000)}
        for version in range(current + 1, target + 1)
    ]  # fmt: skip
    return {
        "database": database,
        "from_version": current,
        "to_version": target,
        "applied": steps,
        "dry_run": bool(args.get("dry_run")),
    }


def cidr_info(args: Args) -> JSONValue:
    text = text_arg(args, "cidr")
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError as err:
        raise ValueError(f"not a valid CIDR block: {quoted(text)}") from err
    hosts = network.num_addresses - (2 if network.version == 4 and network.prefixlen < 31 else 0)
    return {
        "network": str(network.network_address),
        "prefix_length": network.prefixlen,
        "netmask": str(network.netmask),
        "broadcast": str(network.broadcast_address) if network.version == 4 else None,
        "usable_hosts": max(hosts, 0),
        "private": network.is_private,
        "version": network.version,
    }


_CRON_RANGES = (("minute", 0, 59), ("hour", 0, 23), ("day_of_month", 1, 31), ("month", 1, 12),
                ("day_of_week", 0, 6))  # fmt: skip


def explain_cron(args: Args) -> JSONValue:
    fields = text_arg(args, "expression").split()
    if len(fields) != 5:
        raise ValueError("a cron expression has five fields: minute hour day month weekday")
    parsed: dict[str, JSONValue] = {}
    for text, (name, low, high) in zip(fields, _CRON_RANGES, strict=True):
        values: set[int] = set()
        for part in text.split(","):
            match = re.fullmatch(r"(\*|\d+(?:-\d+)?)(?:/(\d+))?", part)
            if match is None:
                raise ValueError(f"cannot read {name} field {quoted(text)}")
            span, step = match.group(1), int(match.group(2) or 1)
            if span == "*":
                start, stop = low, high
            elif "-" in span:
                start, stop = (int(x) for x in span.split("-"))
            else:
                start = stop = int(span)
            if start < low or stop > high or start > stop or step < 1:
                raise ValueError(f"{name} field {quoted(text)} is outside {low}-{high}")
            values.update(range(start, stop + 1, step))
        parsed[name] = sorted(values)
    runs_per_day = len(parsed["minute"]) * len(parsed["hour"])
    return {"fields": parsed, "runs_per_matching_day": runs_per_day}


def uptime_budget(args: Args) -> JSONValue:
    slo = num_arg(args, "slo_percent")
    days = int_arg(args, "window_days")
    allowed = days * 24 * 60 * (1 - slo / 100)
    used = num_arg(args, "downtime_minutes")
    return {
        "allowed_downtime_minutes": round(allowed, 2),
        "remaining_minutes": round(allowed - used, 2),
        "budget_used_percent": round(used / allowed * 100, 1) if allowed > 0 else None,
        "breached": used > allowed,
    }


def _values(args: Args) -> list[float]:
    raw = args.get("values")
    if not isinstance(raw, list) or not raw:
        raise ValueError("'values' must be a non-empty list of numbers")
    return [float(value) for value in raw]


def summary_statistics(args: Args) -> JSONValue:
    values = _values(args)
    ordered = sorted(values)
    # Inclusive quartiles (the same "type 7" rule as compute_percentile) stay between the
    # smallest and the largest value; the exclusive default extrapolates past them.
    quartiles = (
        statistics.quantiles(ordered, n=4, method="inclusive") if len(values) > 1
        else [values[0]] * 3
    )  # fmt: skip
    return {
        "count": len(values),
        "mean": round(statistics.fmean(values), 6),
        "median": statistics.median(values),
        "stdev": round(statistics.stdev(values), 6) if len(values) > 1 else 0.0,
        "min": ordered[0],
        "max": ordered[-1],
        "q1": round(quartiles[0], 6),
        "q3": round(quartiles[2], 6),
    }


def percentile(args: Args) -> JSONValue:
    values = sorted(_values(args))
    p = num_arg(args, "percentile")
    # Linear interpolation between closest ranks (the common "type 7" definition).
    rank = p / 100 * (len(values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(values) - 1)
    value = values[low] + (values[high] - values[low]) * (rank - low)
    return {"percentile": p, "value": round(value, 6)}


def correlation(args: Args) -> JSONValue:
    xs, ys = args.get("x"), args.get("y")
    if not isinstance(xs, list) or not isinstance(ys, list) or len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("'x' and 'y' must be lists of the same length, at least 2")
    r = statistics.correlation([float(v) for v in xs], [float(v) for v in ys])
    slope, intercept = statistics.linear_regression([float(v) for v in xs], [float(v) for v in ys])
    return {"pearson_r": round(r, 6), "slope": round(slope, 6), "intercept": round(intercept, 6)}


def outliers(args: Args) -> JSONValue:
    values = _values(args)
    if len(values) < 4:
        return {"outliers": [], "note": "need at least 4 values"}
    q1, _, q3 = statistics.quantiles(values, n=4)
    spread = q3 - q1
    low, high = q1 - 1.5 * spread, q3 + 1.5 * spread
    found = [{"index": i, "value": v} for i, v in enumerate(values) if v < low or v > high]
    return {"lower_fence": round(low, 6), "upper_fence": round(high, 6), "outliers": found}


def moving_average(args: Args) -> JSONValue:
    values = _values(args)
    window = int_arg(args, "window")
    if window > len(values):
        raise ValueError("'window' is longer than the series")
    ends = range(window, len(values) + 1)
    averages = [round(sum(values[end - window : end]) / window, 6) for end in ends]
    return {"window": window, "averages": averages}


def _sql_result(draw: Draw, args: Args) -> JSONValue:
    query = str(args.get("query", ""))
    columns = re.findall(r"select\s+(.+?)\s+from", query, re.IGNORECASE | re.DOTALL)
    names = [part.strip().split()[-1] for part in columns[0].split(",")] if columns else ["value"]
    if names == ["*"]:
        names = ["id", "created_at", "status"]
    count = draw.integer(1, 5)
    return {
        "columns": names,
        "rows": [[draw.sub(f"{r}{c}").integer(1, 9999) for c in names] for r in range(count)],
        "row_count": count,
    }


DEPLOY_ROW = {"deployment_id": ident("dep", 8), "version": lambda d, a: f"v2.{d.integer(1, 20)}."
              f"{d.sub('p').integer(0, 9)}", "status": pick("succeeded", "succeeded", "failed",
                                                            "rolled_back"),
              "deployed_by": person(), "finished_at": at_time(-14, 0)}  # fmt: skip
ALERT_ROW = {"alert_id": ident("alr", 8), "name": pick("HighErrorRate", "LatencyP99High",
                                                       "DiskAlmostFull", "PodCrashLooping",
                                                       "CertificateExpiringSoon"),
             "service": pick(*SERVICES), "severity": pick("warning", "critical"),
             "since": at_time(-1, 0)}  # fmt: skip

# fmt: off
OPS_SPECS = group(
    "devops",
    tool("get_service_status", "Health, version, replicas and error rate of a service.",
         [SERVICE, ENVIRONMENT],
         {"service": echo("service"), "environment": echo("environment"),
          "status": pick("healthy", "healthy", "degraded"), "version": DEPLOY_ROW["version"],
          "replicas": rint(2, 12), "error_rate_percent": rnum(0, 2.5),
          "p99_latency_ms": rint(80, 900)}, kind="fetch"),
    tool("list_deployments", "Recent deployments of a service, newest first.",
         [SERVICE, ENVIRONMENT, LIMIT],
         {"service": echo("service"), "deployments": rows(DEPLOY_ROW)}),
    tool("deploy_service", "Deploy a version of a service to an environment.",
         [SERVICE, VERSION, ENVIRONMENT,
          choice("strategy", "Rollout strategy.", ("rolling", "canary", "blue_green"),
                 required=False, default="rolling")],
         {"deployment_id": ident("dep", 8), "service": echo("service"),
          "version": echo("version"), "environment": echo("environment"),
          "status": const("in_progress"), "dashboard": link("deploy", "runs/")}),
    tool("rollback_deployment", "Roll a service back to its previous good version.",
         [SERVICE, ENVIRONMENT, string("reason", "Why.", example="Error rate spike after v2.14.1")],
         {"service": echo("service"), "rolled_back_to": DEPLOY_ROW["version"],
          "status": const("in_progress")}),
    tool("scale_service", "Set the number of replicas of a service.",
         [SERVICE, ENVIRONMENT, integer("replicas", "Desired replicas.", minimum=0, maximum=200,
                                        example=6)],
         {"service": echo("service"), "previous_replicas": rint(1, 12),
          "replicas": echo("replicas")}),
    tool("restart_service", "Restart every instance of a service, one at a time.",
         [SERVICE, ENVIRONMENT],
         {"service": echo("service"), "restarted_instances": rint(2, 12),
          "status": const("completed")}),
    tool("get_service_logs", "Recent log lines of a service, optionally filtered.",
         [SERVICE, ENVIRONMENT, choice("level", "Minimum level.", ("debug", "info", "warn",
                                                                  "error"),
                                       required=False, default="info"),
          string("contains", "Only lines containing this text.", required=False), LIMIT],
         {"lines": rows({"at": at_time(0, 0), "level": pick("info", "warn", "error"),
                         "message": pick("request completed", "retrying upstream call",
                                         "connection pool exhausted", "cache miss",
                                         "slow query detected")})}),
    tool("query_metrics", "Time series of a metric for a service over the last hours.",
         [SERVICE, choice("metric", "Metric.", ("requests_per_second", "error_rate",
                                                "p99_latency_ms", "cpu_percent",
                                                "memory_percent")),
          integer("hours", "How far back.", minimum=1, maximum=168, example=6)],
         {"service": echo("service"), "metric": echo("metric"),
          "points": lambda d, a: [round(d.sub(i).number(10, 90), 2)
                                  for i in range(min(int(a.get("hours") or 6), 48))]},
         kind="fetch"),
    tool("create_incident", "Declare an incident and page the on-call responder.",
         [string("title", "What is broken.", example="Checkout errors in eu-west-1"),
          choice("severity", "Severity.", SEVERITIES), SERVICE],
         {"incident_id": lambda d, a: f"INC-{d.integer(1000, 9999)}", "status": const("triggered"),
          "paged": person(), "channel": fmt("inc-{service}")}),
    tool("acknowledge_incident", "Acknowledge an incident so escalation stops.",
         [INCIDENT_ID], {"incident_id": echo("incident_id"), "status": const("acknowledged")}),
    tool("resolve_incident", "Resolve an incident with a summary.",
         [INCIDENT_ID, string("summary", "What fixed it.", example="Rolled back v2.14.1.")],
         {"incident_id": echo("incident_id"), "status": const("resolved"),
          "duration_minutes": rint(8, 300)}),
    tool("get_incident_timeline", "Events of an incident from trigger to now.",
         [INCIDENT_ID],
         {"incident_id": echo("incident_id"),
          "events": rows({"at": at_time(0, 0), "by": person(),
                          "event": pick("triggered", "acknowledged", "status update",
                                        "mitigated", "resolved")}, count_arg="none",
                         default=5)}),
    tool("list_active_alerts", "Alerts currently firing, optionally for one service.",
         [string("service", "Only this service.", required=False), LIMIT],
         {"alerts": rows(ALERT_ROW)}),
    tool("silence_alert", "Silence an alert for a while.",
         [string("alert_id", "Alert id.", example="alr_1f2e3d4c"),
          integer("minutes", "Silence length.", minimum=5, maximum=1440, example=60),
          string("reason", "Why.", example="Known issue, fix deploying.")],
         {"alert_id": echo("alert_id"), "silence_id": ident("sil", 8),
          "expires_in_minutes": echo("minutes")}),
    tool("get_on_call_schedule", "Who is on call for a team now and next.",
         [string("team", "Team name.", example="payments")],
         {"team": echo("team"), "primary": person(), "secondary": person(),
          "handover_at": at_time(1, 3)}),
    tool("list_pods", "Pods of a service in a cluster with their state.",
         [SERVICE, choice("cluster", "Cluster.", ("prod-eu", "prod-us", "staging"))],
         {"pods": rows({"name": lambda d, a: f"{a.get('service')}-{d.hex(5)}-{d.sub('x').hex(5)}",
                        "status": pick("Running", "Running", "Running", "CrashLoopBackOff"),
                        "restarts": rint(0, 4), "node": lambda d, a: f"node-{d.integer(1, 40)}"},
                       count_arg="none", default=4)}),
    tool("run_database_migration",
         "Apply schema migrations to a database up to a target version. Runs alone: no other "
         "tool call may run at the same time.",
         [DATABASE, integer("target_version", "Schema version to migrate to.", minimum=1,
                            maximum=10000, example=42),
          boolean("dry_run", "Only report what would run.")],
         compute=run_database_migration, kind="execute", exclusive=True),
    tool("backup_database", "Take an on-demand snapshot of a database.",
         [DATABASE, string("label", "Label for the snapshot.", required=False)],
         {"snapshot_id": ident("snap", 10), "database": echo("database"),
          "size_gb": rnum(1, 800, 1), "status": const("completed")}),
    tool("restore_database_backup",
         "Restore a database from a snapshot. Runs alone: no other tool call may run meanwhile.",
         [DATABASE, string("snapshot_id", "Snapshot to restore.", example="snap_0a1b2c3d4e")],
         {"database": echo("database"), "restored_from": echo("snapshot_id"),
          "status": const("completed")}, exclusive=True),
    tool("rotate_credentials", "Issue new credentials for a service and revoke the old ones.",
         [SERVICE, choice("kind", "Credential kind.", ("database_password", "api_token",
                                                       "tls_certificate"))],
         {"service": echo("service"), "credential_id": ident("cred", 10),
          "old_credential_expires": at_time(0, 1)}, exclusive=True),
    tool("check_ssl_certificate", "Issuer, expiry and days left of a domain's TLS certificate.",
         [string("domain", "Domain name.", example="shop.example.com")],
         {"domain": echo("domain"), "issuer": pick("Let's Encrypt R11", "DigiCert G2"),
          "expires_on": on_day(5, 300), "days_left": rint(5, 300)}, kind="fetch"),
    tool("check_dns_record", "Current DNS records of a name.",
         [string("name", "Host name.", example="api.example.com"),
          choice("type", "Record type.", ("A", "AAAA", "CNAME", "MX", "TXT"))],
         {"name": echo("name"), "type": echo("type"),
          "values": lambda d, a: [f"203.0.113.{d.integer(1, 254)}"], "ttl": pick(60, 300, 3600)},
         kind="fetch"),
    tool("trigger_ci_pipeline", "Start a CI pipeline on a branch.",
         [string("repository", "Repository as owner/name.", example="acme/storefront"),
          string("branch", "Branch.", example="main")],
         {"pipeline_id": lambda d, a: d.integer(10000, 99999), "status": const("queued"),
          "url": link("ci", "pipelines/")}),
    tool("get_ci_pipeline_status", "Stage-by-stage status of a CI pipeline.",
         [integer("pipeline_id", "Pipeline number.", minimum=1, maximum=2_147_483_647,
                  example=48213)],
         {"pipeline_id": echo("pipeline_id"),
          "stages": each_of(("build", "test", "lint", "deploy"),
                            {"status": pick("passed", "passed", "failed", "running"),
                             "duration_s": rint(20, 900)}, key="stage")}),
    tool("list_feature_flags", "Feature flags and their state per environment.",
         [ENVIRONMENT], {"flags": each_of(("new-checkout", "dark-mode", "beta-search",
                                           "fast-refunds"),
                                          {"enabled": chance(0.5),
                                           "rollout_percent": pick(0, 10, 50, 100)}, key="key")}),
    tool("toggle_feature_flag", "Turn a feature flag on or off, optionally for a percentage.",
         [string("flag", "Flag key.", example="new-checkout"), ENVIRONMENT,
          boolean("enabled", "New state.", default=True),
          integer("rollout_percent", "Share of users.", required=False, minimum=0, maximum=100)],
         {"flag": echo("flag"), "environment": echo("environment"), "enabled": echo("enabled")}),
    tool("calculate_error_budget", "Downtime allowed by an SLO and how much is left.",
         [number("slo_percent", "Availability target.", minimum=50, maximum=99.9999,
                 example=99.9),
          integer("window_days", "SLO window.", minimum=1, maximum=365, example=30),
          number("downtime_minutes", "Downtime so far.", minimum=0, maximum=525_600,
                 example=12)],
         compute=uptime_budget),
    tool("describe_cidr_block", "Network address, netmask and host count of a CIDR block.",
         [string("cidr", "CIDR block.", example="10.20.0.0/22")], compute=cidr_info),
    tool("explain_cron_expression", "The minutes, hours and days a cron expression fires on.",
         [string("expression", "Five-field cron expression.", example="*/15 9-17 * * 1-5")],
         compute=explain_cron),
    tool("get_cloud_cost_report", "Cloud spend by service for a month, with the change.",
         [string("month", "Month as YYYY-MM.", pattern="^[0-9]{4}-[0-9]{2}$", example="2025-02")],
         {"month": echo("month"),
          "by_service": each_of(("compute", "storage", "database", "network", "observability"),
                                {"usd": rnum(300, 40_000, 2), "change_percent": rnum(-20, 35, 1)},
                                key="category")}),
    tool("list_cloud_instances", "Virtual machines in a region with type and state.",
         [choice("region", "Cloud region.", REGIONS), LIMIT],
         {"region": echo("region"),
          "instances": rows({"instance_id": lambda d, a: f"i-{d.hex(17)}",
                             "type": pick("m7g.large", "c7i.xlarge", "r7g.2xlarge"),
                             "state": pick("running", "running", "stopped")})}),
)

DATA_SPECS = group(
    "data",
    tool("run_sql_query", "Run a read-only SQL query on the analytics warehouse.",
         [string("query", "A SELECT statement.", pattern=SELECT_ONLY,
                 example="SELECT region, revenue FROM sales_daily LIMIT 5")],
         {"result": _sql_result}, kind="read"),
    tool("list_tables", "Tables in a warehouse schema with row counts.",
         [string("schema", "Schema name.", example="analytics")],
         {"tables": each_of(("orders", "customers", "sales_daily", "events", "sessions"),
                            {"rows": rint(1000, 90_000_000)}, key="table")}),
    tool("describe_table", "Columns and types of a table.",
         [string("table", "Table name.", example="orders")],
         {"table": echo("table"),
          "columns": const([{"column": "id", "type": "bigint", "nullable": False},
                            {"column": "created_at", "type": "timestamp", "nullable": False},
                            {"column": "customer_id", "type": "bigint", "nullable": False},
                            {"column": "status", "type": "varchar(32)", "nullable": False},
                            {"column": "total", "type": "numeric(12,2)", "nullable": True}])}),
    tool("export_query_results", "Export the result of a saved query to CSV in the drive.",
         [string("query_id", "Saved query id.", example="q_7781"),
          string("path", "Where to write.", pattern="^/.+\\.csv$", example="/exports/q.csv")],
         {"path": echo("path"), "rows": rint(10, 100_000), "status": const("completed")}),
    tool("create_dashboard", "Create a dashboard with charts for saved queries.",
         [string("title", "Dashboard title.", example="Weekly revenue"),
          strings("query_ids", "Saved queries to chart.", example=["q_7781"])],
         {"dashboard_id": ident("dash", 8), "url": link("bi", "d/")}),
    tool("compute_summary_statistics", "Count, mean, median, standard deviation and quartiles.",
         [numbers("values", "Numbers to summarise.", example=[3, 1, 4, 1, 5, 9, 2, 6])],
         compute=summary_statistics),
    tool("compute_percentile", "A percentile of a list of numbers (linear interpolation).",
         [numbers("values", "Numbers.", example=[12, 15, 11, 40, 18]),
          number("percentile", "Percentile 0-100.", minimum=0, maximum=100, example=95)],
         compute=percentile),
    tool("compute_correlation", "Pearson correlation and least-squares line between two series.",
         [numbers("x", "First series.", min_items=2, example=[1, 2, 3, 4]),
          numbers("y", "Second series, same length.", min_items=2, example=[2, 4.1, 5.9, 8.2])],
         compute=correlation),
    tool("detect_outliers", "Values outside 1.5 IQR of the quartiles (Tukey fences).",
         [numbers("values", "Numbers.", example=[10, 12, 11, 13, 12, 95])],
         compute=outliers),
    tool("compute_moving_average", "Simple moving average of a series.",
         [numbers("values", "Series.", example=[1, 2, 3, 4, 5, 6]),
          integer("window", "Window size.", minimum=1, maximum=1000, example=3)],
         compute=moving_average),
)
# fmt: on

SPECS: tuple[Spec, ...] = OPS_SPECS + DATA_SPECS
