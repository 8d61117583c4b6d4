package bot

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/thinbot/thinbot/agentcore"
)

// Metrics are the daemon's Prometheus metrics. Create them with NewMetrics
// and a registry the caller owns; a nil *Metrics records nothing.
type Metrics struct {
	runs         *prometheus.CounterVec
	commands     *prometheus.CounterVec
	approvals    *prometheus.CounterVec
	modelLatency prometheus.Histogram
	errors       *prometheus.CounterVec
	queued       prometheus.Gauge
	active       prometheus.Gauge
	messages     prometheus.Counter
	tokens       *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "thinbot_runs_total",
			Help: "Agent runs by final status."}, []string{"status"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "thinbot_commands_total",
			Help: "Commands and file reads by gate verdict."}, []string{"verdict"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "thinbot_approvals_total",
			Help: "Approval requests by outcome (approved, denied, expired, cancelled, refused_click)."}, []string{"outcome"}),
		modelLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "thinbot_model_latency_seconds",
			Help: "Latency of model calls.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "thinbot_errors_total",
			Help: "Errors by kind (model, store, chat)."}, []string{"kind"}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "thinbot_queue_length",
			Help: "Messages waiting for their thread's run or a free run slot."}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: "thinbot_active_runs",
			Help: "Runs in progress."}),
		messages: prometheus.NewCounter(prometheus.CounterOpts{Name: "thinbot_messages_total",
			Help: "Chat messages accepted for a session."}),
	}
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "thinbot_tokens_total",
		Help: "Model tokens by channel and kind (prompt, completion), as the server reports them or, without a report, estimated."}, []string{"channel", "kind"})
	reg.MustRegister(m.runs, m.commands, m.approvals, m.modelLatency, m.errors, m.queued, m.active, m.messages, m.tokens)
	// Every label a counter takes is there at zero from the start, so a
	// rate() or an alert on it sees a series before the first event.
	for _, s := range []string{agentcore.StatusAnswered, agentcore.StatusDone, agentcore.StatusBudget, agentcore.StatusCancelled, agentcore.StatusError, agentcore.StatusInterrupted} {
		m.runs.WithLabelValues(s)
	}
	for _, v := range []string{"pass", "confirm", "deny"} {
		m.commands.WithLabelValues(v)
	}
	for _, o := range []string{"approved", "denied", "expired", "cancelled", "refused_click"} {
		m.approvals.WithLabelValues(o)
	}
	for _, k := range []string{"model", "store", "chat"} {
		m.errors.WithLabelValues(k)
	}
	return m
}

func (m *Metrics) run(status string) {
	if m != nil {
		m.runs.WithLabelValues(status).Inc()
	}
}

func (m *Metrics) command(verdict string) {
	if m != nil {
		m.commands.WithLabelValues(verdict).Inc()
	}
}

func (m *Metrics) approval(outcome string) {
	if m != nil {
		m.approvals.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) model(seconds float64) {
	if m != nil {
		m.modelLatency.Observe(seconds)
	}
}

func (m *Metrics) error(kind string) {
	if m != nil {
		m.errors.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) queue(delta float64) {
	if m != nil {
		m.queued.Add(delta)
	}
}

func (m *Metrics) activeRuns(delta float64) {
	if m != nil {
		m.active.Add(delta)
	}
}

func (m *Metrics) message() {
	if m != nil {
		m.messages.Inc()
	}
}

func (m *Metrics) tokensUsed(channel string, u agentcore.Usage) {
	if m != nil {
		m.tokens.WithLabelValues(channel, "prompt").Add(float64(u.PromptTokens))
		m.tokens.WithLabelValues(channel, "completion").Add(float64(u.CompletionTokens))
	}
}
