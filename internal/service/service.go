// Package service runs one kernelstream processor as a service: its metrics
// registry, its HTTP endpoints (/metrics, /healthz, /readyz; and, when
// serve.addr is set, the scoring endpoint of package scoring on a listener
// of its own) and its bounded shutdown. cmd/consumer is the service's command; the demos run several.
package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/buildinfo"
	"github.com/kernelstream/kernelstream/internal/scoring"
	"github.com/kernelstream/kernelstream/processor"
)

// NewProcessor builds the processor of cfg and registers every metric the
// service exports in reg: the Go runtime's, the process's, the build's and
// the processor's (the dashboards and alert rules under deployments/ are
// tested against this set).
func NewProcessor(cfg config.Config, logger zerolog.Logger, reg prometheus.Registerer) (*processor.Processor, error) {
	// The scheduler's histograms besides the default Go metrics: how long
	// goroutines wait for a CPU (go_sched_latencies_seconds) and the
	// collector's pauses, what a decision's tail is made of when the pod
	// lacks CPU (the KernelstreamCPUStarved alert).
	goMetrics := collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)
	reg.MustRegister(collectors.NewGoCollector(goMetrics), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	pcfg, err := cfg.ProcessorConfig(logger, reg)
	if err != nil {
		return nil, err
	}
	for _, b := range pcfg.GroupBalancers {
		if sb, ok := b.(processor.StateAwareBalancer); ok {
			logger.Info().Str("member_identity", sb.Identity()).Msg("sticky partition assignment")
		}
	}
	return processor.New(pcfg)
}

// Serve runs one processor with its HTTP endpoints until ctx is cancelled
// and the processor has shut down. started, if set, receives the processor
// once it exists (the demo reads its Stats).
func Serve(ctx context.Context, cfg config.Config, logger zerolog.Logger, started func(*processor.Processor)) error {
	logger.Info().Object("config", cfg).Msg("starting")
	reg := prometheus.NewRegistry()
	p, err := NewProcessor(cfg, logger, reg)
	if err != nil {
		return err
	}
	if started != nil {
		started(p)
	}
	var srv *http.Server
	if cfg.HTTP.Addr != "" {
		ln, err := net.Listen("tcp", cfg.HTTP.Addr)
		if err != nil {
			return fmt.Errorf("http.addr: %w", err)
		}
		// Not ready once shutting down: Kubernetes stops routing to a pod
		// that is leaving.
		ready := func() bool { return ctx.Err() == nil && p.Ready() }
		events := func() []string {
			var out []string
			for _, e := range p.Events() {
				out = append(out, e.String())
			}
			return out
		}
		srv = &http.Server{Handler: Handler(reg, ready, events), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error().Err(err).Str("addr", cfg.HTTP.Addr).Msg("http server failed")
			}
		}()
		logger.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics /healthz /readyz")
	}

	if cfg.Serve.Addr != "" {
		// Scoring on request: its own listener, apart from the metrics
		// (it answers from learner state, which is user data).
		sc, err := scoring.Start(cfg, p, logger, reg)
		if err != nil {
			if srv != nil {
				srv.Close()
			}
			return err
		}
		defer sc.Shutdown()
	}

	// Watchdog: the processor bounds its own shutdown by shutdown.grace; if
	// it overruns anyway, say so loudly rather than hang past the pod's
	// termination grace period.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		logger.Info().Dur("grace", cfg.Shutdown.Grace).Msg("stopping: finishing the records in hand, checkpointing and leaving the group")
		select {
		case <-done:
		case <-time.After(cfg.Shutdown.Grace + 5*time.Second):
			logger.Error().Dur("grace", cfg.Shutdown.Grace).Msg("shutdown overran its grace period")
		}
	}()

	runErr := p.Run(ctx)
	if srv != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		srv.Shutdown(shutCtx) //nolint:errcheck // best effort on the way out
		cancel()
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}

// Handler serves the three operational endpoints. /readyz lists, after
// its verdict, the latest events (log truncations, offset resets) that did
// not stop processing but that an operator must know of.
func Handler(reg *prometheus.Registry, ready func() bool, events func() []string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n")) //nolint:errcheck
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		body := "ready\n"
		if !ready() {
			body = "not ready: partitions not yet assigned and restored, or a partition stopped by a non-retriable error (see the log and kernelstream_failed_partitions_total)\n"
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if ev := events(); len(ev) > 0 {
			body += "events (latest last):\n"
			for _, e := range ev {
				body += "  " + e + "\n"
			}
		}
		w.Write([]byte(body)) //nolint:errcheck
	})
	return mux
}
