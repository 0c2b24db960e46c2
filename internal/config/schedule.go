package config

import (
	"strings"

	"github.com/robfig/cron/v3"
)

// ParseSchedule parses a sync's schedule: 5 cron fields or a descriptor
// (@hourly, @every 90m). The fields are read in UTC unless the expression
// names its zone first (CRON_TZ=Europe/Paris 0 9 * * *): a schedule then
// fires at the same instants whichever machine's serve leads, whatever its
// local zone (docs/config.md#syncs).
func ParseSchedule(spec string) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		spec = "CRON_TZ=UTC " + spec
	}
	return cron.ParseStandard(spec)
}
