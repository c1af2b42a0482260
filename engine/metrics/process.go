package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eventd/eventd/buildinfo"
)

// RegisterProcess adds client_golang's standard Go runtime (go_*) and
// process (process_*) collectors, so a soak run can tell from /metrics
// alone whether memory, goroutines and file descriptors stay flat, and
// eventd_build_info, so a dashboard can tell which build it is looking at.
// eventd's own metrics never use the go_ or process_ namespaces.
func (r *Registry) RegisterProcess() {
	r.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(buildinfo.Get()),
	)
}

// buildInfo is the constant 1 with the build's identity as labels, the
// convention for joining a version onto other series in PromQL.
func buildInfo(b buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "eventd_build_info",
		Help: "A constant 1 labelled with the running build's version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}
