package processor

import (
	"context"
	"time"

	"github.com/rs/zerolog"
)

// episode logs a failing operation once per episode: a warning at the first
// failure, a debug line for the next ones, an info line with the count and
// duration when it succeeds again.
type episode struct {
	log   zerolog.Logger
	what  string
	fails int
	since time.Time
}

func newEpisode(log zerolog.Logger, what string) *episode { return &episode{log: log, what: what} }

func (e *episode) fail(err error) {
	if e.fails == 0 {
		e.since = time.Now()
		e.log.Warn().Err(err).Str("op", e.what).Msg("kafka unavailable, retrying with backoff")
	} else {
		e.log.Debug().Err(err).Str("op", e.what).Int("attempt", e.fails+1).Msg("still failing")
	}
	e.fails++
}

func (e *episode) ok() {
	if e.fails > 0 {
		e.log.Info().Str("op", e.what).Int("failures", e.fails).Dur("outage", time.Since(e.since)).Msg("kafka reachable again")
		e.fails = 0
	}
}

// retry runs op until it succeeds or ctx ends, backing off exponentially
// up to backoffMax between attempts; failures are logged once per episode.
func retry(ctx context.Context, log zerolog.Logger, what string, backoffMax time.Duration, op func() error) error {
	ep := newEpisode(log, what)
	backoff := 100 * time.Millisecond
	for {
		err := op()
		if err == nil {
			ep.ok()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ep.fail(err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, backoffMax)
	}
}
