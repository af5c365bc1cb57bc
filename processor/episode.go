package processor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
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

// readerLog adapts kafka-go's error logger so that a reader's retries during
// an outage are logged once per episode (ok is called on each message).
type readerLog struct {
	mu sync.Mutex
	ep *episode
}

func (e *episode) fail(err error) {
	err = briefWriteErrors(err)
	if e.fails == 0 {
		e.since = time.Now()
		e.log.Warn().Err(err).Str("op", e.what).Msg("kafka unavailable, retrying with backoff")
	} else {
		e.log.Debug().Err(err).Str("op", e.what).Int("attempt", e.fails+1).Msg("still failing")
	}
	e.fails++
}

// briefWriteErrors shortens kafka-go's WriteErrors, whose message repeats
// the error of every message of a failed batch (hundreds of identical
// "connection refused" in one log line), to the count and the first one.
func briefWriteErrors(err error) error {
	var we kafka.WriteErrors
	if !errors.As(err, &we) {
		return err
	}
	for _, e := range we {
		if e != nil {
			return fmt.Errorf("%d of %d messages not written, the first: %w", we.Count(), len(we), e)
		}
	}
	return err
}

func (e *episode) ok() {
	if e.fails > 0 {
		e.log.Info().Str("op", e.what).Int("failures", e.fails).Dur("outage", time.Since(e.since)).Msg("kafka reachable again")
		e.fails = 0
	}
}

func (r *readerLog) Printf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ep.fail(fmt.Errorf(format, a...))
}

func (r *readerLog) ok() {
	r.mu.Lock()
	if r.ep.fails > 0 {
		r.ep.ok()
	}
	r.mu.Unlock()
}
