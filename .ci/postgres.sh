#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: a fresh cluster in a temp dir on a free loopback
# port, trust authentication, superuser and database both named `prism`.
#
#   pg_env="$(.ci/postgres.sh start)"    # the export lines, nothing else on stdout
#   eval "$pg_env"                        # PRISM_TOOLS_PG_DSN and PRISM_TOOLS_PG_DIR
#   .ci/postgres.sh stop "$PRISM_TOOLS_PG_DIR"
#
# (A bare `eval "$(.ci/postgres.sh start)"` works too, but `set -e` cannot see a failed start
# through it: eval of an empty string succeeds.)
#
# `start [DIR]` installs the Debian `postgresql` package when no initdb/pg_ctl can be found (as
# root; otherwise it stops with an error), then creates and starts a cluster in DIR (a new temp dir
# by default). Given a DIR (or PRISM_TOOLS_PG_DIR) that already holds a cluster made by this
# script, it starts that cluster if it is down and prints the same exports again.
# `stop [DIR]` stops the server and removes DIR; a DIR that is already gone is not an error, and a
# directory that this script did not make is never removed.
# PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user (made by the
# Debian package) or else as `nobody`, and DIR is handed to that user.
set -euo pipefail

readonly MARKER=".prism-tools-postgres"
MADE=0

say() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

find_bindir() {
	local found candidate
	if found="$(command -v pg_ctl)" && command -v initdb > /dev/null; then
		dirname "$(readlink -f "$found")"
		return 0
	fi
	# Debian keeps the server programs off PATH, one directory per major version: take the newest.
	candidate="$(
		find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/pg_ctl' 2> /dev/null |
			sort -V | tail -n 1
	)"
	if [[ -n "$candidate" && -x "$(dirname "$candidate")/initdb" ]]; then
		dirname "$candidate"
		return 0
	fi
	return 1
}

install_postgres() {
	if [[ "$(id -u)" -ne 0 ]]; then
		die "initdb/pg_ctl not found; install PostgreSQL (Debian: apt-get install postgresql) or run as root"
	fi
	say "initdb/pg_ctl not found: installing the Debian postgresql package"
	# apt's chatter goes to stderr: stdout is reserved for the export lines.
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
}

# The account the server runs as: ourselves, or an unprivileged one when we are root.
server_user() {
	if [[ "$(id -u)" -ne 0 ]]; then
		id -un
	elif id -u postgres > /dev/null 2>&1; then
		echo postgres
	else
		echo nobody
	fi
}

# Runs a server program as the server user, from a directory that user can enter.
as_server() {
	if [[ "$(id -u)" -eq 0 ]]; then
		(cd / && runuser -u "$PG_USER" -- "$@")
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])' 2> /dev/null || echo $((20000 + RANDOM % 30000))
}

is_running() {
	[[ -f "$DIR/data/postmaster.pid" ]] && as_server "$BIN/pg_ctl" -D "$DIR/data" status > /dev/null 2>&1
}

init_cluster() {
	chown "$PG_USER" "$DIR"
	chmod 700 "$DIR"
	as_server test -w "$DIR" ||
		die "$PG_USER cannot write to $DIR (is a parent directory private?); pass a DIR under /tmp"
	if ! as_server "$BIN/initdb" -D "$DIR/data" -A trust -U prism -E UTF8 --no-sync \
		> "$DIR/initdb.log" 2>&1; then
		cat "$DIR/initdb.log" >&2
		die "initdb failed"
	fi
	touch "$DIR/$MARKER"
}

# Starts the server, choosing another free port when the one tried is taken meanwhile.
start_server() {
	local attempt port
	for attempt in 1 2 3 4 5; do
		# A cluster started again keeps its port when that port is still free.
		if [[ "$attempt" -eq 1 && -f "$DIR/port" ]]; then
			port="$(cat "$DIR/port")"
		else
			port="$(free_port)"
		fi
		# Later settings win, so rewriting this small file on each try is enough.
		as_server tee "$DIR/data/postgresql.auto.conf" > /dev/null <<- CONF
			listen_addresses = '127.0.0.1'
			port = $port
			unix_socket_directories = '$DIR'
		CONF
		if as_server "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start \
			> /dev/null 2>&1; then
			echo "$port" > "$DIR/port"
			return 0
		fi
		say "start attempt $attempt on port $port failed"
	done
	tail -n 30 "$DIR/server.log" >&2 || true
	die "the server did not start; log: $DIR/server.log"
}

create_database() {
	local port exists
	port="$(cat "$DIR/port")"
	exists="$(
		"$BIN/psql" -h 127.0.0.1 -p "$port" -U prism -d postgres -XAtq \
			-c "SELECT 1 FROM pg_database WHERE datname = 'prism'"
	)"
	if [[ "$exists" != 1 ]]; then
		"$BIN/createdb" -h 127.0.0.1 -p "$port" -U prism prism
	fi
}

cmd_start() {
	DIR="${1:-${PRISM_TOOLS_PG_DIR:-}}"
	if ! BIN="$(find_bindir)"; then
		install_postgres
		BIN="$(find_bindir)" || die "PostgreSQL is installed but initdb/pg_ctl are still not found"
	fi
	PG_USER="$(server_user)"
	if [[ -z "$DIR" ]]; then
		DIR="$(mktemp -d "${TMPDIR:-/tmp}/prism-pg.XXXXXX")"
		MADE=1
	elif [[ ! -e "$DIR" ]]; then
		mkdir -p "$DIR"
		MADE=1
	fi
	DIR="$(cd "$DIR" && pwd -P)"
	trap 'undo_failed_start $?' EXIT
	if [[ -f "$DIR/$MARKER" && -f "$DIR/data/PG_VERSION" ]]; then
		PG_USER="$(stat -c %U "$DIR/data")"
		is_running || start_server
	elif [[ -z "$(ls -A "$DIR")" ]]; then
		MADE=1
		init_cluster
		start_server
	else
		die "$DIR is not empty and holds no cluster made by this script"
	fi
	create_database
	trap - EXIT
	printf 'export PRISM_TOOLS_PG_DSN=%q\n' "postgresql://prism@127.0.0.1:$(cat "$DIR/port")/prism"
	printf 'export PRISM_TOOLS_PG_DIR=%q\n' "$DIR"
}

# A start that fails removes the cluster it made, stopping the server first if it got that far.
undo_failed_start() {
	if [[ "$1" -ne 0 && "$MADE" == 1 && -d "$DIR" ]]; then
		say "start failed; removing $DIR"
		touch "$DIR/$MARKER"
		cmd_stop "$DIR" || true
	fi
}

cmd_stop() {
	local pid
	DIR="${1:-${PRISM_TOOLS_PG_DIR:-}}"
	[[ -n "$DIR" ]] || die "usage: $0 stop DIR (or set PRISM_TOOLS_PG_DIR)"
	if [[ ! -e "$DIR" ]]; then
		say "$DIR is already gone"
		return 0
	fi
	[[ -f "$DIR/$MARKER" ]] || die "$DIR was not made by this script; not removing it"
	DIR="$(cd "$DIR" && pwd -P)"
	if [[ -f "$DIR/data/postmaster.pid" ]]; then
		PG_USER="$(stat -c %U "$DIR/data")"
		if BIN="$(find_bindir)"; then
			# The cluster is thrown away, so an immediate shutdown is enough and the quickest.
			as_server "$BIN/pg_ctl" -D "$DIR/data" -m immediate -w -t 60 stop > /dev/null 2>&1 ||
				true
		fi
		pid="$(head -n 1 "$DIR/data/postmaster.pid" 2> /dev/null || true)"
		if [[ -n "$pid" ]] && kill -0 "$pid" 2> /dev/null &&
			[[ "$(readlink -f "/proc/$pid/cwd" 2> /dev/null)" == "$DIR/data" ]]; then
			kill -QUIT "$pid" 2> /dev/null || true
			for _ in $(seq 100); do
				kill -0 "$pid" 2> /dev/null || break
				sleep 0.1
			done
			! kill -0 "$pid" 2> /dev/null || die "the server (pid $pid) did not stop; $DIR kept"
		fi
	fi
	rm -rf "$DIR"
}

case "${1:-}" in
start)
	shift
	cmd_start "$@"
	;;
stop)
	shift
	cmd_stop "$@"
	;;
*)
	echo "usage: $0 start [DIR] | stop [DIR]" >&2
	exit 2
	;;
esac
