package config

import (
	"net"
	"net/url"
	"strings"
)

// SSLModeWarning says, for a PostgreSQL connection string, why its
// sslmode does not protect the connection (docs/config.md#source): only
// verify-full checks that the server is the one named, so with any other
// mode anyone on the path can pose as it and read the password. "" when
// the mode verifies, or the server is on this machine (loopback, a Unix
// socket). The DSN's text never appears in the warning.
func SSLModeWarning(dsn string) string {
	host, mode := "", ""
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return ""
		}
		host, mode = u.Hostname(), u.Query().Get("sslmode")
		if h := u.Query().Get("host"); host == "" && h != "" {
			host = h
		}
	} else {
		for _, f := range strings.Fields(dsn) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			v = strings.Trim(v, "'")
			switch k {
			case "host":
				host = v
			case "sslmode":
				mode = v
			}
		}
	}
	if local(host) {
		return ""
	}
	switch mode {
	case "verify-full":
		return ""
	case "verify-ca":
		return "sslmode=verify-ca checks the server's certificate but not that it is the host named; use sslmode=verify-full"
	case "":
		return "no sslmode: the default (prefer) may connect without TLS and never verifies the server, so anyone on the path can pose as it and read the password; use sslmode=verify-full"
	}
	return "sslmode=" + mode + " does not verify the server, so anyone on the path can pose as it and read the password; use sslmode=verify-full"
}

// local reports whether host is this machine: empty (a Unix socket by
// default), a socket directory, localhost or a loopback address.
func local(host string) bool {
	if host == "" || strings.HasPrefix(host, "/") || host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func isPostgres(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}
