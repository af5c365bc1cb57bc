package processor

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/kernelstream/kernelstream/changelog"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// Standby replicas (ChangelogConfig.StandbyReplicas; docs/pipeline.md,
// "Standby replicas"). The group balancer hands each changelog partition to
// up to N members other than its owner; such a member tails it into memory
// (the newest bundle of every key and the last marker, exactly what a
// restore reads), and announces it in its JoinGroup claims, so that when the
// owner goes the partition goes to it. Its restore then reads only the
// records written since its copy's last one, instead of the whole partition.
//
// The copy is in memory only: Badger holds the partitions this member owns,
// and a copy costs about the partition's state size. A copy survives
// rebalances while the partition stays on standby here, and is handed to the
// worker when the partition becomes this member's.

// standbyCopy is a warm copy of one changelog partition.
type standbyCopy struct {
	mu      sync.Mutex // guards st and stopped against the tailer
	st      *changelog.State
	stopped bool      // the tailer applies nothing more (it may still be closing its reader)
	read    time.Time // when it last applied a record
	cancel  context.CancelFunc
}

// stop ends the tailer: once it returns, st no longer changes. It does not
// wait for the tailer's reader to close (up to a fetch wait), so that a
// takeover does not either.
func (c *standbyCopy) stop() {
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

// apply adds a record to the copy unless it was stopped.
func (c *standbyCopy) apply(m *kafkaio.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return context.Canceled
	}
	c.read = time.Now()
	return c.st.Apply(m)
}

// syncStandbys starts tailing the changelog partitions newly assigned to this
// member as standby, keeps the ones still assigned, stops (keeping their
// copy) the ones it now owns, and drops the others.
func (p *Processor) syncStandbys(standby, owned []int) {
	p.sbMu.Lock()
	defer p.sbMu.Unlock()
	if p.standbys == nil {
		p.standbys = map[int]*standbyCopy{}
	}
	keep := make(map[int]bool, len(standby))
	for _, part := range standby {
		keep[part] = true
		if c, ok := p.standbys[part]; !ok || c.cancel == nil { // new, or stopped when it was ours
			c = &standbyCopy{st: changelog.NewState()}
			p.standbys[part] = c
			p.startTailer(part, c)
		}
	}
	mine := make(map[int]bool, len(owned))
	for _, part := range owned {
		mine[part] = true
	}
	for part, c := range p.standbys {
		switch {
		case keep[part]:
		case mine[part]:
			c.stop() // the worker takes it (takeStandby); a later standby assignment starts over
			p.m.standbyLag.DeleteLabelValues(strconv.Itoa(part))
		default:
			c.stop()
			delete(p.standbys, part)
			p.m.standbyLag.DeleteLabelValues(strconv.Itoa(part))
		}
	}
}

// startTailer follows the changelog partition into c until c is stopped,
// retrying after errors (a broker outage) with the usual backoff.
func (p *Processor) startTailer(part int, c *standbyCopy) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	lag := p.m.standbyLag.WithLabelValues(strconv.Itoa(part))
	src := p.changelogSource()
	go func() {
		ep := newEpisode(p.log.With().Int("partition", part).Logger(), "standby: follow the changelog")
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			c.mu.Lock()
			from := c.st.Next
			c.mu.Unlock()
			err := src.Follow(ctx, part, from, c.apply, func(n int64) { lag.Set(float64(n)) })
			if ctx.Err() != nil {
				return
			}
			ep.fail(err)
			if errors.Is(err, changelog.ErrCorrupt) {
				// The same record would fail again: start the copy over
				// (the owner's own restore reports it if it is still there).
				c.mu.Lock()
				c.st = changelog.NewState()
				c.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, p.cfg.RetryBackoffMax)
		}
	}()
}

// takeStandby hands the warm copy of part, if any, to its new owner, with
// when it last read a record.
func (p *Processor) takeStandby(part int) (*changelog.State, time.Time) {
	p.sbMu.Lock()
	defer p.sbMu.Unlock()
	c, ok := p.standbys[part]
	if !ok {
		return nil, time.Time{}
	}
	c.stop()
	delete(p.standbys, part)
	p.m.standbyLag.DeleteLabelValues(strconv.Itoa(part))
	return c.st, c.read
}

// stopStandbys ends every tailer (the processor stops).
func (p *Processor) stopStandbys() {
	p.sbMu.Lock()
	defer p.sbMu.Unlock()
	for part, c := range p.standbys {
		c.stop()
		delete(p.standbys, part)
	}
}
