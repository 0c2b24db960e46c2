#!/usr/bin/env bash
# test-services.sh: make sure PostgreSQL, Redis and MySQL (MariaDB) are reachable for the test suite, run a
# command with ONCESYNC_TEST_DATABASE_URL, ONCESYNC_TEST_REDIS_URL and ONCESYNC_TEST_MYSQL_URL exported, and stop
# whatever this script started.
#
# Usage:
#   scripts/test-services.sh run -- <command> [args...]
#   scripts/test-services.sh help
#
# Resolution, per service:
#   1. If ONCESYNC_TEST_DATABASE_URL / ONCESYNC_TEST_REDIS_URL / ONCESYNC_TEST_MYSQL_URL is set, probe it;
#      otherwise probe the defaults postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable,
#      redis://127.0.0.1:6379/0 and mysql://root@127.0.0.1:3306/.
#   2. If the probe fails (or ONCESYNC_TEST_FORCE_THROWAWAY=1), start a throwaway server on a free port in a
#      temp dir and point the URL at it.
#   Missing binaries (psql/pg_isready/initdb/pg_ctl, redis-server/redis-cli, mariadb/mariadbd, chromium, pgbouncer) are
#   installed with apt-get (root, or passwordless sudo), waiting for another apt/dpkg to finish. redis-server and redis-cli are always made available: cluster tests start
#   their own nodes with them.
#
# The command's exit status is this script's exit status. Throwaway servers are stopped and their temp dir
# removed on exit, including when the command fails or the script is interrupted. Servers that were already
# running are never touched.
#
# Environment:
#   ONCESYNC_TEST_DATABASE_URL     PostgreSQL URL to probe first (optional)
#   ONCESYNC_TEST_REDIS_URL        Redis URL to probe first (optional)
#   ONCESYNC_TEST_MYSQL_URL        MySQL/MariaDB URL to probe first (optional), mysql://USER[:PASSWORD]@HOST:PORT/
#   ONCESYNC_TEST_FORCE_THROWAWAY  1: skip probing, always start throwaway PostgreSQL, Redis and MariaDB
#   ONCESYNC_TEST_SERVICES_QUIET   1: print nothing but errors
set -euo pipefail

readonly DEFAULT_PG_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
readonly DEFAULT_REDIS_URL='redis://127.0.0.1:6379/0'
readonly DEFAULT_MYSQL_URL='mysql://root@127.0.0.1:3306/'

tmp_root=""     # temp dir holding throwaway servers' data; removed on exit
pg_started=""   # data dir of a PostgreSQL we started
pg_runas=""     # user our PostgreSQL runs as when we are root
redis_started="" # port of a Redis we started
redis_pidfile=""
mysql_pid=""     # pid of a mariadbd we started
mysql_dir=""
apt_updated=""

log() {
	[[ "${ONCESYNC_TEST_SERVICES_QUIET:-}" == 1 ]] || printf 'test-services: %s\n' "$*" >&2
}

die() {
	printf 'test-services: error: %s\n' "$*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

have() { command -v "$1" >/dev/null 2>&1; }

# as_root runs a command as root: directly when we are root, through passwordless sudo otherwise.
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif have sudo && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		die "need root to run: $* (install postgresql and redis-server yourself, or run as root)"
	fi
}

# apt_install installs Debian packages, running apt-get update at most once per invocation.
apt_install() {
	have apt-get || die "apt-get not found; install $* by hand"
	log "installing $* with apt-get"
	# Another apt or dpkg (unattended upgrades, a parallel run of this script) may hold the lock: wait for it.
	local lock=(-o DPkg::Lock::Timeout=600)
	if [[ -z "$apt_updated" ]]; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" update -qq >&2 || die "apt-get update failed"
		apt_updated=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" install -y -qq --no-install-recommends "$@" </dev/null >&2 ||
		die "apt-get install $* failed"
}

# pg_bindir prints the directory holding initdb/pg_ctl/postgres, or nothing.
pg_bindir() {
	if have initdb && have pg_ctl; then
		dirname "$(command -v pg_ctl)"
		return
	fi
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
		printf '%s\n' "$d"
	fi
}

ensure_pg_client() {
	have psql || have pg_isready || apt_install postgresql
}

ensure_pg_server() {
	[[ -n "$(pg_bindir)" ]] || apt_install postgresql
	[[ -n "$(pg_bindir)" ]] || die "initdb/pg_ctl not found even after installing postgresql"
}

ensure_redis() {
	if ! have redis-server || ! have redis-cli; then
		apt_install redis-server redis-tools
	fi
	have redis-server && have redis-cli || die "redis-server/redis-cli not found even after installing"
}

# mysql_client prints the MySQL/MariaDB command-line client, or nothing.
mysql_client() {
	if have mariadb; then echo mariadb; elif have mysql; then echo mysql; fi
}

# mariadbd_bin prints the MariaDB server binary, or nothing.
mariadbd_bin() {
	local b
	for b in "$(command -v mariadbd 2>/dev/null)" /usr/sbin/mariadbd "$(command -v mysqld 2>/dev/null)" /usr/sbin/mysqld; do
		[[ -n "$b" && -x "$b" ]] && { printf '%s\n' "$b"; return; }
	done
}

ensure_mysql_client() {
	[[ -n "$(mysql_client)" ]] || apt_install mariadb-client
	[[ -n "$(mysql_client)" ]] || die "mariadb/mysql client not found even after installing mariadb-client"
}

ensure_mysql_server() {
	if [[ -z "$(mariadbd_bin)" ]] || ! have mariadb-install-db; then
		apt_install mariadb-server
	fi
	[[ -n "$(mariadbd_bin)" ]] && have mariadb-install-db || die "mariadbd/mariadb-install-db not found even after installing mariadb-server"
}

# mysql_ok reports whether a mysql://USER[:PASSWORD]@HOST[:PORT]/ URL accepts a query.
mysql_ok() {
	local url=$1 re='^mysql://([^:@/]*)(:([^@/]*))?@([^:/]+)(:([0-9]+))?(/.*)?$'
	[[ "$url" =~ $re ]] || return 1
	local user=${BASH_REMATCH[1]} pass=${BASH_REMATCH[3]} host=${BASH_REMATCH[4]} port=${BASH_REMATCH[6]:-3306}
	[[ $(MYSQL_PWD="$pass" timeout 10 "$(mysql_client)" --no-defaults --protocol=TCP -h "$host" -P "$port" \
		-u "$user" --connect-timeout=3 -N -B -e 'select 1' 2>/dev/null) == 1 ]]
}

# pg_ok reports whether the URL accepts a real query (psql), or at least connections (pg_isready).
pg_ok() {
	local url=$1
	if have psql; then
		PGCONNECT_TIMEOUT=3 timeout 10 psql -X -w -q -A -t -d "$url" -c 'select 1' 2>/dev/null | grep -qx 1
	else
		timeout 10 pg_isready -q -t 3 -d "$url" 2>/dev/null
	fi
}

redis_ok() {
	local url=$1
	[[ $(timeout 5 redis-cli -u "$url" ping 2>/dev/null) == PONG ]]
}

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port prints a TCP port on 127.0.0.1 that nothing is listening on right now.
free_port() {
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 30000))
		if ! port_in_use "$p" && ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
			printf '%s\n' "$p"
			return
		fi
	done
	die "no free TCP port found"
}

make_tmp_root() {
	[[ -n "$tmp_root" ]] && return
	tmp_root=$(mktemp -d "${TMPDIR:-/tmp}/oncesync-services.XXXXXX")
	# PostgreSQL may run as another user when we are root; it must be able to reach its data dir.
	chmod 0755 "$tmp_root"
}

# pg_user_cmd runs a command as the PostgreSQL user (postgres refuses to run as root).
pg_user_cmd() {
	if [[ -z "$pg_runas" ]]; then
		"$@"
	elif have runuser; then
		runuser -u "$pg_runas" -- "$@"
	else
		su -s /bin/sh "$pg_runas" -c "$(printf '%q ' "$@")"
	fi
}

start_pg() {
	ensure_pg_server
	local bindir dir port attempt
	bindir=$(pg_bindir)
	make_tmp_root
	dir="$tmp_root/pg"
	mkdir -p "$dir"
	if [[ $(id -u) -eq 0 ]]; then
		if id postgres >/dev/null 2>&1; then pg_runas=postgres; else pg_runas=nobody; fi
		chown "$pg_runas" "$dir"
	fi
	chmod 0700 "$dir"
	(cd "$dir" && pg_user_cmd "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C \
		--no-sync >"$dir/initdb.log" 2>&1) || {
		cat "$dir/initdb.log" >&2
		die "initdb failed"
	}
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		if (cd "$dir" && pg_user_cmd "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
			-o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
			start >/dev/null 2>&1); then
			pg_started="$dir/data"
			break
		fi
		log "PostgreSQL did not start on port $port (attempt $attempt)"
	done
	if [[ -z "$pg_started" ]]; then
		tail -n 20 "$dir/server.log" >&2 || true
		die "could not start a throwaway PostgreSQL"
	fi
	PG_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	# Mirror the usual machine: a "test" database next to "postgres".
	if have psql; then
		psql -X -q -d "$PG_URL" -c 'create database test' >/dev/null 2>&1 || true
	fi
	pg_ok "$PG_URL" || die "throwaway PostgreSQL on port $port does not answer"
	log "started throwaway PostgreSQL on 127.0.0.1:$port ($dir)"
}

start_redis() {
	ensure_redis
	local dir port attempt
	make_tmp_root
	dir="$tmp_root/redis"
	mkdir -p "$dir"
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		redis_pidfile="$dir/redis-$port.pid"
		if redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
			--dir "$dir" --pidfile "$redis_pidfile" --logfile "$dir/redis-$port.log" >/dev/null 2>&1; then
			local i
			for i in $(seq 1 100); do
				if redis_ok "redis://127.0.0.1:$port/0"; then
					redis_started=$port
					break 2
				fi
				sleep 0.1
			done
			# It daemonized but never answered: make sure it is gone before trying another port.
			[[ -s "$redis_pidfile" ]] && kill "$(cat "$redis_pidfile")" 2>/dev/null || true
		fi
		log "Redis did not start on port $port (attempt $attempt)"
	done
	if [[ -z "$redis_started" ]]; then
		tail -n 20 "$dir"/*.log >&2 2>/dev/null || true
		die "could not start a throwaway Redis"
	fi
	REDIS_URL="redis://127.0.0.1:$redis_started/0"
	log "started throwaway Redis on 127.0.0.1:$redis_started ($dir)"
}

start_mysql() {
	ensure_mysql_server
	local bin port attempt runas=root i
	bin=$(mariadbd_bin)
	make_tmp_root
	mysql_dir="$tmp_root/mysql"
	mkdir -p "$mysql_dir"
	if [[ $(id -u) -eq 0 ]] && id mysql >/dev/null 2>&1; then
		runas=mysql
		chown mysql "$mysql_dir"
	elif [[ $(id -u) -ne 0 ]]; then
		runas=$(id -un)
	fi
	mariadb-install-db --no-defaults --datadir="$mysql_dir/data" --user="$runas" --auth-root-authentication-method=normal \
		--skip-test-db >"$mysql_dir/install.log" 2>&1 || {
		cat "$mysql_dir/install.log" >&2
		die "mariadb-install-db failed"
	}
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		"$bin" --no-defaults --datadir="$mysql_dir/data" --user="$runas" --port="$port" --bind-address=127.0.0.1 \
			--socket="$mysql_dir/mysqld.sock" --pid-file="$mysql_dir/mysqld.pid" --log-error="$mysql_dir/error.log" \
			--skip-log-bin --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --innodb-buffer-pool-size=128M \
			--max-connections=300 </dev/null >/dev/null 2>&1 &
		mysql_pid=$!
		for i in $(seq 1 300); do
			kill -0 "$mysql_pid" 2>/dev/null || break
			if timeout 5 "$(mysql_client)" --no-defaults -S "$mysql_dir/mysqld.sock" -u root -N -B -e 'select 1' >/dev/null 2>&1; then
				break 2
			fi
			sleep 0.2
		done
		kill -9 "$mysql_pid" 2>/dev/null || true
		wait "$mysql_pid" 2>/dev/null || true
		mysql_pid=""
		log "MariaDB did not start on port $port (attempt $attempt)"
	done
	if [[ -z "$mysql_pid" ]]; then
		tail -n 20 "$mysql_dir/error.log" >&2 || true
		die "could not start a throwaway MariaDB"
	fi
	# root over TCP from 127.0.0.1, without a password, as on the usual machine.
	"$(mysql_client)" --no-defaults -S "$mysql_dir/mysqld.sock" -u root -e \
		"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" ||
		die "could not set up root@127.0.0.1 on the throwaway MariaDB"
	MYSQL_URL="mysql://root@127.0.0.1:$port/"
	mysql_ok "$MYSQL_URL" || die "throwaway MariaDB on port $port does not answer"
	log "started throwaway MariaDB on 127.0.0.1:$port ($mysql_dir)"
}

stop_mysql() {
	[[ -n "$mysql_pid" ]] || return 0
	local i
	kill "$mysql_pid" 2>/dev/null || true
	for i in $(seq 1 150); do
		kill -0 "$mysql_pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -9 "$mysql_pid" 2>/dev/null || true
	wait "$mysql_pid" 2>/dev/null || true
	log "stopped throwaway MariaDB"
	mysql_pid=""
}

stop_pg() {
	[[ -n "$pg_started" ]] || return 0
	local bindir
	bindir=$(pg_bindir)
	(cd "$tmp_root" && pg_user_cmd "$bindir/pg_ctl" -D "$pg_started" -m immediate -w -t 30 stop >/dev/null 2>&1) || {
		# pg_ctl failed: kill the postmaster by its pid file, never by name.
		local pid
		pid=$(head -n 1 "$pg_started/postmaster.pid" 2>/dev/null || true)
		[[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
	}
	log "stopped throwaway PostgreSQL"
	pg_started=""
}

stop_redis() {
	[[ -n "$redis_started" ]] || return 0
	local pid=""
	[[ -s "$redis_pidfile" ]] && pid=$(cat "$redis_pidfile")
	timeout 5 redis-cli -p "$redis_started" shutdown nosave >/dev/null 2>&1 || true
	if [[ -n "$pid" ]]; then
		local i
		for i in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	log "stopped throwaway Redis"
	redis_started=""
}

cleanup() {
	local status=$?
	set +e
	stop_redis
	stop_pg
	stop_mysql
	[[ -n "$tmp_root" ]] && rm -rf "$tmp_root"
	exit "$status"
}

setup() {
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP

	# Redis binaries are needed by cluster tests even when a Redis server is already running; a PostgreSQL
	# client is needed to probe. Install whatever is missing in one apt-get run.
	local pkgs=()
	have redis-server && have redis-cli || pkgs+=(redis-server redis-tools)
	have psql || have pg_isready || pkgs+=(postgresql)
	[[ -n "$(mysql_client)" ]] || pkgs+=(mariadb-client)
	# The web UI's browser tests drive Debian's Chromium (chromedp); no browser is downloaded at run time.
	[[ "${ONCESYNC_TEST_NO_BROWSER:-}" == 1 ]] || have chromium || pkgs+=(chromium)
	# The PostgreSQL store's pooler tests start their own pgbouncer (testenv.PgBouncer) from Debian's package.
	have pgbouncer || [[ -x /usr/sbin/pgbouncer ]] || pkgs+=(pgbouncer)
	[[ ${#pkgs[@]} -eq 0 ]] || apt_install "${pkgs[@]}"
	ensure_redis
	ensure_pg_client
	ensure_mysql_client

	PG_URL=${ONCESYNC_TEST_DATABASE_URL:-$DEFAULT_PG_URL}
	REDIS_URL=${ONCESYNC_TEST_REDIS_URL:-$DEFAULT_REDIS_URL}
	MYSQL_URL=${ONCESYNC_TEST_MYSQL_URL:-$DEFAULT_MYSQL_URL}

	if [[ "${ONCESYNC_TEST_FORCE_THROWAWAY:-}" == 1 ]]; then
		log "ONCESYNC_TEST_FORCE_THROWAWAY=1: not probing existing servers"
		start_pg
		start_redis
		start_mysql
	else
		if pg_ok "$PG_URL"; then
			log "using running PostgreSQL"
		else
			log "no PostgreSQL answers at the configured address; starting a throwaway one"
			start_pg
		fi
		if redis_ok "$REDIS_URL"; then
			log "using running Redis"
		else
			log "no Redis answers at the configured address; starting a throwaway one"
			start_redis
		fi
		if mysql_ok "$MYSQL_URL"; then
			log "using running MySQL/MariaDB"
		else
			log "no MySQL/MariaDB answers at the configured address; starting a throwaway MariaDB"
			start_mysql
		fi
	fi
	export ONCESYNC_TEST_DATABASE_URL="$PG_URL"
	export ONCESYNC_TEST_REDIS_URL="$REDIS_URL"
	export ONCESYNC_TEST_MYSQL_URL="$MYSQL_URL"
}

main() {
	local cmd=${1:-help}
	[[ $# -gt 0 ]] && shift
	case "$cmd" in
	run)
		[[ "${1:-}" == -- ]] && shift
		[[ $# -gt 0 ]] || die "usage: $0 run -- <command> [args...]"
		setup
		local status=0
		"$@" || status=$?
		exit "$status"
		;;
	help | -h | --help)
		usage
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
