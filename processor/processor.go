// Package processor is kernelstream's stream engine: a kafka-go consumer
// group whose members run one worker goroutine per assigned input partition,
// reading and producing through package kafkaio (franz-go's kgo).
// Each worker routes a record to the learner of its key, predicts, emits the
// prediction, and updates on the label (inline or delayed through the
// partition's pending map); it dead-letters unusable records; and it
// checkpoints learners, pending map and offsets in Badger (package
// checkpoint) with the protocol of docs/pipeline.md: outputs acknowledged,
// then Badger, then the group commit. State is thus effectively once,
// predictions at least once (deduplicate downstream by id).
package processor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/models"
)

// Processor runs the consumer group. Build it with New, run it with Run.
type Processor struct {
	cfg      Config
	log      zerolog.Logger
	c        counters
	m        *metrics
	loss     models.Loss
	factory  *models.Factory // the learners of cfg.Model, shared by the partitions
	specHash uint64
	inParts  atomic.Int64    // the input topic's partition count (start-up checks, each generation)
	admin    *kafka.Client   // metadata and topic configs (start-up checks)
	kio      kafkaio.Cluster // the record path: reads, produces, offsets
	// The written topics' max.message.bytes as the brokers have them
	// (start-up; changelogLimit is the changelog's: the largest record a
	// checkpoint writes), and the changelog's delete.retention.ms.
	limits          map[string]int32
	changelogLimit  int
	deleteRetention time.Duration
	clParts         atomic.Int64 // the changelog's partitions as last ensured
	events          eventLog     // truncations and offset resets, for /readyz

	mu       sync.Mutex
	assigned map[int]bool  // partition -> restored (replay done)
	failed   map[int]error // partitions stopped by a non-retriable error
	inGen    bool

	staged atomic.Int64 // checkpoints that took the staged path (tests)

	sbMu     sync.Mutex
	standbys map[int]*standbyCopy // warm copies of changelog partitions (standby.go)

	// Scoring requests (score.go): the running workers, the owners of
	// the input partitions in this generation, the partition numbers.
	scoreMu sync.Mutex
	scorers map[int]*scorer
	// scoreCopies holds learners that answered scoring requests, for the
	// next requests to reload (models.Reloader; score.go).
	scoreCopies sync.Pool
	owners      atomic.Pointer[map[int]owner]
	partIDs     atomic.Pointer[[]int]
}

// New validates cfg, applies the defaults and registers the metrics. It does
// not touch the network or the disk.
func New(cfg Config) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	loss, err := cfg.Model.ResolvedLoss()
	if err != nil {
		return nil, fmt.Errorf("processor: Model: %w", err)
	}
	spec, err := json.Marshal(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("processor: Model: %w", err)
	}
	factory, err := models.NewFactory(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("processor: Model: %w", err)
	}
	h := fnv.New64a()
	h.Write(spec)
	p := &Processor{cfg: cfg, log: cfg.Logger.With().Str("component", "processor").Logger(), loss: loss,
		factory: factory, specHash: h.Sum64(), assigned: map[int]bool{}}
	p.m = newMetrics(cfg.Registerer, &p.c, cfg.Model.Algorithm, cfg.minFreeBytes())
	return p, nil
}

// Ready reports whether the processor is in a group generation and every
// partition assigned to it is restored (state loaded, gap replayed).
func (p *Processor) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inGen || len(p.failed) > 0 || p.c.disk.low.Load() {
		return false
	}
	for _, ok := range p.assigned {
		if !ok {
			return false
		}
	}
	return true
}

// Stats returns a snapshot of the counters.
func (p *Processor) Stats() Stats {
	s := p.c.snapshot()
	p.mu.Lock()
	for part, ok := range p.assigned {
		if ok {
			s.Partitions = append(s.Partitions, part)
		}
	}
	p.mu.Unlock()
	sort.Ints(s.Partitions)
	return s
}

// Failed returns the partitions stopped by a non-retriable error in this
// generation, with their errors.
func (p *Processor) Failed() map[int]error {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int]error, len(p.failed))
	for k, v := range p.failed {
		out[k] = v
	}
	return out
}

func (p *Processor) setFailed(part int, err error) {
	p.mu.Lock()
	if p.failed == nil {
		p.failed = map[int]error{}
	}
	p.failed[part] = err
	p.c.failedNow.Store(int64(len(p.failed)))
	p.mu.Unlock()
	p.c.failed.Add(1)
}

func (p *Processor) setAssigned(part int, restored bool) {
	p.mu.Lock()
	p.assigned[part] = restored
	p.mu.Unlock()
}

// Run joins the group and processes until ctx is cancelled; then every
// worker finishes the record in hand, checkpoints its partition and commits
// its offsets, the member leaves the group, and Run returns nil (within
// ShutdownGrace). Broker outages are retried with backoff, logged once per
// episode. Run returns an error only for what retrying cannot fix (the
// checkpoint store).
func (p *Processor) Run(ctx context.Context) error {
	cfg := p.cfg
	store, err := checkpoint.Open(checkpoint.Options{Dir: cfg.CheckpointDir, SyncWrites: true,
		MaxTxnBytes: cfg.checkpointTxnBytes, MemTableBytes: cfg.CheckpointMemTableMiB << 20, Logger: p.log})
	if err != nil {
		return fmt.Errorf("processor: CheckpointDir: %w", err)
	}
	p.c.store.Store(store)
	p.c.disk.free.Store(-1)
	p.diskOK()
	defer func() {
		p.c.store.Store(nil)
		p.staged.Add(store.StagedCommits())
		store.Close()
	}()

	p.admin = p.client()
	defer p.admin.Transport.(*kafka.Transport).CloseIdleConnections()
	if err := p.startupChecks(ctx, store); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// The record path's client first: growing the changelog uses it. The
	// batch limits it applies are read below, before anything is produced.
	kc, err := kafkaio.New(p.kafkaOptions(p.batchLimit))
	if err != nil {
		return fmt.Errorf("processor: %w", err)
	}
	defer kc.Close() // after the workers and standbys, deferred below
	p.kio = kc
	if cfg.Changelog.Topic != "" {
		if err := p.ensureChangelog(ctx, int(p.inParts.Load())); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("processor: %w: %w", ErrClusterMismatch, err)
		}
	}
	if err := p.readTopicConfigs(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	topics := []string{cfg.InputTopic}
	if cfg.LabelsTopic != "" {
		topics = append(topics, cfg.LabelsTopic)
	}
	groupTopics := topics
	if n := cfg.Changelog.StandbyReplicas; n > 0 {
		// Standby tasks are assignments of the changelog topic.
		groupTopics = append(append([]string(nil), topics...), cfg.Changelog.Topic)
		for _, b := range stateAware(cfg.GroupBalancers) {
			b.SetStandby(cfg.Changelog.Topic, n)
		}
		defer p.stopStandbys()
	}
	// Tell a sticky balancer which partitions' state is on this disk: those
	// of the last generation this member took part in.
	if held, err := store.Held(); err == nil && len(held) > 0 {
		claims := map[string][]int{}
		for _, t := range topics {
			claims[t] = held
		}
		for _, b := range stateAware(cfg.GroupBalancers) {
			b.SetRestored(claims)
		}
	}
	start := kafka.FirstOffset
	if cfg.StartOffset == "latest" {
		start = kafka.LastOffset
	}
	balancers := cfg.GroupBalancers
	if len(balancers) == 0 {
		balancers = []kafka.GroupBalancer{kafka.RangeGroupBalancer{}}
	}
	dialer, err := p.dialer()
	if err != nil {
		return err
	}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: cfg.Group, Brokers: cfg.Brokers, Dialer: dialer, Topics: groupTopics,
		GroupBalancers: balancers, HeartbeatInterval: cfg.HeartbeatInterval, SessionTimeout: cfg.SessionTimeout,
		RebalanceTimeout: cfg.RebalanceTimeout, JoinGroupBackoff: 200 * time.Millisecond, StartOffset: start,
		// Partitions added to the input start a rebalance that assigns
		// them (their changelog partitions are added then).
		WatchPartitionChanges: true, PartitionWatchInterval: cmp.Or(cfg.partitionWatch, 10*time.Second),
		Timeout:     5 * time.Second,
		Logger:      kafka.LoggerFunc(func(f string, a ...any) { p.log.Debug().Str("client", "kafka-go").Msgf(f, a...) }),
		ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) { p.log.Debug().Str("client", "kafka-go").Msgf(f, a...) }),
	})
	if err != nil {
		return fmt.Errorf("processor: consumer group: %w", err)
	}
	// The whole shutdown (final checkpoints, then the group leave) fits in
	// ShutdownGrace counted from the cancellation of ctx.
	var stopAt atomic.Int64
	defer context.AfterFunc(ctx, func() { stopAt.Store(time.Now().UnixNano()) })()
	leave := func() {
		wait := cfg.ShutdownGrace
		if at := stopAt.Load(); at != 0 {
			wait = max(cfg.ShutdownGrace-time.Since(time.Unix(0, at)), time.Second)
		}
		done := make(chan struct{})
		go func() { cg.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(wait):
			p.log.Warn().Msg("leaving the group timed out")
		}
	}

	ep := newEpisode(p.log, "join group")
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		gen, err := cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, kafka.InvalidSessionTimeout) {
				// A setting the broker refuses at every attempt, not an
				// outage: retrying would only log "unavailable" forever.
				leave()
				return fmt.Errorf("processor: %w: SessionTimeout %v is outside the broker's group.min.session.timeout.ms to group.max.session.timeout.ms (6 s to 30 min by default): %w", ErrClusterMismatch, cfg.SessionTimeout, err)
			}
			ep.fail(err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, cfg.RetryBackoffMax)
			continue
		}
		ep.ok()
		backoff = 100 * time.Millisecond
		if err := p.runGeneration(ctx, gen, store, leave); err != nil {
			leave()
			return err
		}
	}
	leave()
	p.log.Info().Msg("stopped")
	return nil
}

// runGeneration runs one worker per assigned input partition until the
// generation ends or ctx is cancelled, and returns once they have all
// checkpointed. On shutdown it leaves the group before the generation's
// goroutine returns, so that kafka-go does not rejoin in between.
func (p *Processor) runGeneration(ctx context.Context, gen *kafka.Generation, store *checkpoint.Store, leave func()) error {
	cfg := p.cfg
	groupLab := map[int]int64{}
	for _, a := range gen.Assignments[cfg.LabelsTopic] {
		groupLab[a.ID] = a.Offset
	}
	parts := gen.Assignments[cfg.InputTopic]
	p.mu.Lock()
	p.assigned = map[int]bool{}
	p.failed = nil
	p.c.failedNow.Store(0)
	for _, a := range parts {
		p.assigned[a.ID] = false
	}
	p.inGen = true
	p.mu.Unlock()
	ids := make([]int, len(parts))
	for i, a := range parts {
		ids[i] = a.ID
	}
	p.log.Info().Int32("generation", gen.ID).Str("member", gen.MemberID).Ints("partitions", ids).Msg("assigned")
	// Partitions added to the input end every member's generation: each
	// counts them, for the partitioner check (keys move to other
	// partitions with the new count, their state does not;
	// docs/pipeline.md, "Adding partitions"), also a member assigned none
	// of the new ones. A member assigned one must know, and retries.
	known, need, n := int(p.inParts.Load()), 0, 0
	if len(ids) > 0 {
		need = slices.Max(ids) + 1
	}
	count := func() error {
		var err error
		if n, err = p.inputPartitions(ctx); err == nil && n < need {
			err = fmt.Errorf("the input has %d partitions, and partition %d is assigned", n, need-1)
		}
		return err
	}
	err := count()
	if err != nil && need > known {
		err = retry(ctx, p.log, "count the input topic's partitions", cfg.RetryBackoffMax, count)
	}
	if err == nil && n > known {
		p.log.Warn().Int("partitions", n).Int("before", known).Msg("partitions were added to the input")
		p.inParts.Store(int64(n))
	}
	for _, b := range stateAware(cfg.GroupBalancers) {
		b.SetOwnedAssignments(gen.Assignments)
	}
	if err := store.SetHeld(ids); err != nil {
		return fmt.Errorf("%w: %w", errStoreFailed, err)
	}
	if cfg.Changelog.StandbyReplicas > 0 {
		var standby []int
		for _, a := range gen.Assignments[cfg.Changelog.Topic] {
			standby = append(standby, a.ID)
		}
		if len(standby) > 0 {
			p.log.Info().Int32("generation", gen.ID).Ints("partitions", standby).Msg("standby")
		}
		p.syncStandbys(standby, ids)
	}

	if p.Scoring() {
		gen.Start(func(gctx context.Context) { p.learnOwners(gctx, gen) })
	}
	result := make(chan error, 1)
	release := make(chan struct{})
	gen.Start(func(gctx context.Context) {
		wctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-gctx.Done():
			case <-ctx.Done():
			case <-wctx.Done():
			}
			cancel()
		}()
		var wg sync.WaitGroup
		var fatal atomic.Pointer[error]
		for _, a := range parts {
			lab, hasLab := groupLab[a.ID]
			if cfg.LabelsTopic != "" && !hasLab {
				p.log.Error().Int("partition", a.ID).Str("labels_topic", cfg.LabelsTopic).
					Msg("labels partition not assigned with its input partition (balancer must co-partition); reading it anyway")
				lab = kafkaio.Start
				if cfg.StartOffset == "latest" {
					lab = kafkaio.End
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var txn kafkaio.Txn // the partition's transactional producer, kept across restarts
				for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, cfg.RetryBackoffMax) {
					w := newWorker(p, store, p.kio, a.ID)
					w.txn = txn
					err := w.run(wctx, gen, a.Offset, lab)
					if errors.Is(err, errRestartPartition) {
						txn = w.txn
					}
					if errors.Is(err, errRestartPartition) && wctx.Err() == nil {
						p.c.restarts.Add(1)
						// An exactly-once checkpoint did not commit: from the
						// last one again, after a pause (Kafka is likely down).
						p.log.Warn().Err(err).Int("partition", a.ID).Dur("after", backoff).Msg("partition restarts from its last checkpoint")
						select {
						case <-wctx.Done():
						case <-time.After(backoff):
						}
						continue
					}
					if txn != nil && errors.Is(err, errRestartPartition) {
						txn.Close() // the generation ended before the restart
					}
					if err != nil && !errors.Is(err, errRestartPartition) {
						fatal.CompareAndSwap(nil, &err)
						cancel()
					}
					return
				}
			}()
		}
		wg.Wait()
		var err error
		if e := fatal.Load(); e != nil {
			err = *e
		}
		result <- err
		if ctx.Err() != nil || err != nil {
			select { // hold the generation until Run leaves the group
			case <-release:
			case <-gctx.Done():
			}
		}
	})
	err = <-result
	p.owners.Store(nil)
	p.mu.Lock()
	p.inGen = false
	p.assigned = map[int]bool{}
	p.mu.Unlock()
	if ctx.Err() != nil || err != nil {
		go func() { time.Sleep(cfg.ShutdownGrace); close(release) }()
		leave()
	}
	return err
}

var errStoreFailed = errors.New("processor: checkpoint store failed")
