package web

import (
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// metrics serves /metrics: to a principal that sees every workspace as
// gathered, to others without the series of workspaces and syncs they do
// not see (series labelled with neither are deployment-wide and kept).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	g := s.p.Metrics
	if p != nil && !p.everywhere() {
		ws, err := s.workspaces(r.Context())
		if err != nil {
			status, msg := s.classify(r, err)
			http.Error(w, msg, status)
			return
		}
		g = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			fams, err := s.p.Metrics.Gather()
			for _, f := range fams {
				f.Metric = slices.DeleteFunc(f.Metric, func(m *dto.Metric) bool {
					for _, l := range m.GetLabel() {
						switch l.GetName() {
						case "workspace":
							if !p.Sees(l.GetValue()) {
								return true
							}
						case "sync", "sync_id":
							if w, ok := ws[l.GetValue()]; !ok || !p.Sees(w) {
								return true
							}
						}
					}
					return false
				})
			}
			fams = slices.DeleteFunc(fams, func(f *dto.MetricFamily) bool { return len(f.Metric) == 0 })
			return fams, err
		})
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}
