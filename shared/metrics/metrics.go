// Package metrics is `aegis serve`'s Prometheus metrics, served on
// /metrics: calls by outcome and code, gateway and per-upstream latency,
// DynamoDB operation latency, circuit state, and what is in flight. It
// uses github.com/prometheus/client_golang and is imported by cmd/aegis
// only: the Lambda functions keep their EMF lines (shared/telemetry) and do
// not link it (docs/design/metrics.md; a test pins it).
//
// Labels are bounded: tenant and server are registry names (validated,
// operator-made), code and word come from the refusal table or the
// upstream's code, outcome and method from fixed lists. Tool names are
// never labels: a client chooses them.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aegis-gw/aegis/shared/audit"
)

// Circuit is one circuit's state as a scrape reports it.
type Circuit struct {
	Tenant, Server string
	State          string // closed, open or half-open (breaker.StateAt)
}

// Circuits lists every circuit at a scrape, within ctx's deadline.
type Circuits func(ctx context.Context) ([]Circuit, error)

// States are the circuit states aegis_circuit_state reports, one series
// each (1 for the current state, 0 for the others).
var States = []string{"closed", "open", "half-open"}

// CircuitTimeout bounds the store reads of one scrape's circuit states.
const CircuitTimeout = 2 * time.Second

// methods are the JSON-RPC methods a call is labelled with; any other is
// "other".
var methods = map[string]bool{
	"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true,
	"sampling/createMessage": true, "elicitation/create": true, "roots/list": true,
}

// Buckets of the latency histograms, in seconds: 1 ms to 30 s (a call's
// budget is UPSTREAM_TIMEOUT_SECS, default 10, plus the store's margin).
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// storeBuckets are those of DynamoDB operations: 0.5 ms to 5 s (each
// operation has a 2 s budget, dynamo.DefaultOpTimeout, retries included).
var storeBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5}

// Registry holds the metrics. It implements the gateway's Metrics. Safe
// for concurrent use.
type Registry struct {
	reg          *prometheus.Registry
	calls        *prometheus.CounterVec
	callSeconds  *prometheus.HistogramVec
	upSeconds    *prometheus.HistogramVec
	upInFlight   *prometheus.GaugeVec
	storeSeconds *prometheus.HistogramVec
	reqInFlight  prometheus.Gauge
}

// New returns the metrics; circuits (nil: no circuit metrics) is read at
// each scrape.
func New(circuits Circuits) *Registry {
	m := &Registry{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_calls_total",
			Help: "Audited calls by tenant, JSON-RPC method, outcome (allowed, refused, error, indeterminate), code and word (empty when allowed).",
		}, []string{"tenant", "method", "outcome", "code", "word"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aegis_call_duration_seconds",
			Help:    "Gateway latency of audited calls, from arrival to the audit record, by method and outcome.",
			Buckets: latencyBuckets,
		}, []string{"method", "outcome"}),
		upSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aegis_upstream_duration_seconds",
			Help:    "Upstream exchanges of tools/call by tenant, server and outcome (answered, upstream_error, timeout, failed).",
			Buckets: latencyBuckets,
		}, []string{"tenant", "server", "outcome"}),
		upInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_upstream_in_flight",
			Help: "tools/call exchanges this process has in flight, by tenant and server.",
		}, []string{"tenant", "server"}),
		storeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aegis_store_duration_seconds",
			Help:    "DynamoDB operations by operation and result (ok, error), retries included.",
			Buckets: storeBuckets,
		}, []string{"operation", "result"}),
		reqInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aegis_http_requests_in_flight",
			Help: "HTTP requests this process is serving now.",
		}),
	}
	m.reg.MustRegister(m.calls, m.callSeconds, m.upSeconds, m.upInFlight, m.storeSeconds, m.reqInFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if circuits != nil {
		m.reg.MustRegister(&circuitCollector{list: circuits})
	}
	return m
}

// Handler serves the metrics in Prometheus' text (or OpenMetrics) format.
func (m *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Gatherer is the registry, for tests.
func (m *Registry) Gatherer() prometheus.Gatherer { return m.reg }

// RecordCall implements the gateway's Metrics.
func (m *Registry) RecordCall(rec audit.Record) {
	method := rec.Method
	if !methods[method] {
		method = "other"
	}
	code := ""
	if rec.Code != 0 {
		code = strconv.Itoa(rec.Code)
	}
	m.calls.WithLabelValues(rec.Tenant, method, string(rec.Outcome), code, rec.Word).Inc()
	m.callSeconds.WithLabelValues(method, string(rec.Outcome)).Observe(rec.LatencyMs / 1000)
}

// UpstreamCall implements the gateway's Metrics.
func (m *Registry) UpstreamCall(tenant, server string) func(outcome string) {
	g := m.upInFlight.WithLabelValues(tenant, server)
	g.Inc()
	start := time.Now()
	return func(outcome string) {
		g.Dec()
		m.upSeconds.WithLabelValues(tenant, server, outcome).Observe(time.Since(start).Seconds())
	}
}

// InFlight wraps next, counting the requests it is serving.
func (m *Registry) InFlight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.reqInFlight.Inc()
		defer m.reqInFlight.Dec()
		next.ServeHTTP(w, r)
	})
}

// AddAWSMiddleware times every DynamoDB operation (dynamo.WithMiddleware):
// from its start to its answer, retries included.
func (m *Registry) AddAWSMiddleware(s *middleware.Stack) error {
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("aegis-store-metrics",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			start := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			result := "ok"
			if err != nil {
				result = "error"
			}
			m.storeSeconds.WithLabelValues(awsmiddleware.GetOperationName(ctx), result).Observe(time.Since(start).Seconds())
			return out, md, err
		}), middleware.Before)
}

// circuitCollector reports aegis_circuit_state at each scrape, and how
// many scrapes could not read the states (counted and reported in the same
// Collect, so a scrape shows its own failure).
type circuitCollector struct {
	list Circuits
	errs atomic.Int64
}

var (
	circuitDesc = prometheus.NewDesc("aegis_circuit_state",
		"Circuit breaker state per tenant and server, shared by every instance: 1 for the current state.",
		[]string{"tenant", "server", "state"}, nil)
	circuitErrDesc = prometheus.NewDesc("aegis_circuit_read_errors_total",
		"Scrapes whose circuit states could not be read (in full) from the store.", nil, nil)
)

func (c *circuitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- circuitDesc
	ch <- circuitErrDesc
}

func (c *circuitCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), CircuitTimeout)
	defer cancel()
	cs, err := c.list(ctx)
	if err != nil {
		c.errs.Add(1)
	}
	ch <- prometheus.MustNewConstMetric(circuitErrDesc, prometheus.CounterValue, float64(c.errs.Load()))
	for _, ci := range cs {
		for _, st := range States {
			v := 0.0
			if st == ci.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(circuitDesc, prometheus.GaugeValue, v, ci.Tenant, ci.Server, st)
		}
	}
}
