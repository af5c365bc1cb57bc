package processor

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	mathrand "math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/testparallel"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// TestMain runs up to 8 tests at once: the broker tests mostly wait (group
// joins, an outage, rebalances), so they overlap instead of queueing.
func TestMain(m *testing.M) {
	testparallel.Default(8)
	os.Exit(m.Run())
}

// Topics of every test cluster.
const (
	tIn, tOut, tDLQ, tLabels = "in", "out", "dlq", "labels"
	nParts                   = 3
)

// startCluster starts an in-process kfake broker on port (0 = any) with the
// test topics, persisting into dataDir when given (so that a restart on the
// same port and dir is the same cluster).
func startCluster(t *testing.T, port int, dataDir string, extra ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(nParts, tIn, tOut, tDLQ, tLabels),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(32 << 20)})}
	opts = append(opts, extra...)
	if port != 0 {
		opts = append(opts, kfake.Ports(port))
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	var c *kfake.Cluster
	var err error
	for i := 0; i < 50; i++ { // the port may linger briefly after a Close
		if c, err = kfake.NewCluster(opts...); err == nil {
			// Closed after the test's clients (cleanups run last first):
			// a kgo client closed after its broker takes 2 s to give up.
			t.Cleanup(c.Close)
			return c
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("kfake: %v", err)
	return nil
}

// freePort returns a port nobody listens on, below the kernel's ephemeral
// range: a test whose broker is absent at first or restarts on the port
// leaves it free meanwhile, and an ephemeral port could then be given to
// another test's listener (port 0) or connection, whose broker the
// processor would reach instead (TestBrokerAbsentAtStart met one: a
// broker with other session limits).
func freePort(t *testing.T) int {
	lo := 32768 // Linux's default start of net.ipv4.ip_local_port_range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				lo = n
			}
		}
	}
	for range 200 {
		port := 10000 + mathrand.IntN(lo-10000)
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			l.Close()
			return port
		}
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}

// testRecord is one input record of a scenario.
type testRecord struct {
	topic string
	key   string
	value string
	time  time.Time // its Kafka timestamp, for the tester; zero = the tester's clock
}

// produce writes records in order (per partition order is what matters).
func produce(t *testing.T, addr string, recs []testRecord) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, BatchBytes: 32 << 20, BatchSize: 1000}
	defer w.Close()
	msgs := make([]kafka.Message, 0, len(recs))
	// Distinct, increasing timestamps: the order of the scenario is the
	// order of the merged input and labels topics.
	base := timestamps(len(recs))
	for i, r := range recs {
		topic := r.topic
		if topic == "" {
			topic = tIn
		}
		var key []byte
		if r.key != "" {
			key = []byte(r.key)
		}
		msgs = append(msgs, kafka.Message{Topic: topic, Key: key, Value: []byte(r.value), Time: base.Add(time.Duration(i) * time.Millisecond)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(msgs) > 0 {
		n := min(len(msgs), 500)
		if err := w.WriteMessages(ctx, msgs[:n]...); err != nil {
			t.Fatalf("produce: %v", err)
		}
		msgs = msgs[n:]
	}
}

// lastBase keeps the timestamps of successive produce calls increasing
// (tests run in parallel: lastBaseMu guards it).
var (
	lastBase   time.Time
	lastBaseMu sync.Mutex
)

// outRecord is a decoded output message, or a dead letter (its headers).
type outRecord struct {
	wire.Output
	headers map[string]string
	value   []byte
}

// consumer reads a topic from the start with franz-go (a second, independent
// Kafka client).
type consumer struct {
	t   *testing.T
	cl  *kgo.Client
	mu  sync.Mutex
	got []outRecord
	// close closes the client once; it runs at cleanup, or earlier in a
	// test that starts a broker after the consumer (cleanups run last
	// first, and a client closed after its broker takes 1-2 s to give up).
	close func()
}

func newConsumer(t *testing.T, addr, topic string) *consumer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	c := &consumer{t: t, cl: cl, close: sync.OnceFunc(cl.Close)}
	t.Cleanup(c.close)
	return c
}

// waitFor polls until pred holds on what has been read, or fails after timeout.
func (c *consumer) waitFor(timeout time.Duration, what string, pred func([]outRecord) bool) []outRecord {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if pred(c.got) {
			return c.got
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s (have %d records)", what, len(c.got))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := c.cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			headers := make(map[string]string, len(r.Headers))
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			c.got = append(c.got, newOutRecord(r.Key, r.Value, headers))
		})
	}
}

// newOutRecord decodes one output or dead-letter message.
func newOutRecord(key, value []byte, headers map[string]string) outRecord {
	var o outRecord
	_ = json.Unmarshal(value, &o)
	o.value, o.headers = value, headers
	if o.Key == "" {
		o.Key = string(key)
	}
	return o
}

func atLeast(n int) func([]outRecord) bool { return func(r []outRecord) bool { return len(r) >= n } }

// distinctIDs counts distinct (key, id) pairs.
func distinctIDs(rs []outRecord) map[string]outRecord {
	m := map[string]outRecord{}
	for _, r := range rs {
		m[r.Key+"/"+string(r.ID)] = r
	}
	return m
}

// testConfig is a processor config on addr with small intervals.
func testConfig(t *testing.T, addr, dir string, spec models.Spec, logw *logBuffer) Config {
	var log zerolog.Logger
	if logw != nil {
		log = zerolog.New(logw)
	} else {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(testLogLevel)
	}
	return Config{
		Brokers: []string{addr}, Group: "g", InputTopic: tIn, OutputTopic: tOut, DLQTopic: tDLQ,
		Model: spec, CheckpointDir: dir, CheckpointInterval: 200 * time.Millisecond, CheckpointMaxRecords: 25,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond, RebalanceTimeout: 10 * time.Second,
		ShutdownGrace: 10 * time.Second, RetryBackoffMax: time.Second, Logger: log, MaxLearners: 4,
	}
}

// running is a processor running in the background.
type running struct {
	p      *Processor
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg Config) *running {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := p.Run(ctx)
		if err != nil {
			t.Errorf("Run returned: %v", err)
		}
		r.done <- err
	}()
	return r
}

// stop cancels Run and checks that it returns nil within the grace period.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// storedStates reads every learner blob (without the n_updates prefix) of a
// stopped processor's checkpoint directory, by key.
func storedStates(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[string][]byte{}
	for p := 0; p < nParts; p++ {
		err := s.EachLearner(p, func(k, v []byte) error {
			_, n := binary.Uvarint(v)
			out[string(k)] = v[n:]
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// reference replays each key's records directly through models.New(spec,
// key): predict then update, labels through a per-key pending map. It
// returns the expected prediction per "key/id" and the final state per key.
type reference struct {
	yhat   map[string]float64
	states map[string][]byte
	dec    map[string]models.Decision
	rank   map[string][]string
}

func replay(t *testing.T, spec models.Spec, recs []testRecord, topK int) reference {
	t.Helper()
	ref := reference{yhat: map[string]float64{}, states: map[string][]byte{}, dec: map[string]models.Decision{}, rank: map[string][]string{}}
	loss, _ := spec.ResolvedLoss()
	type pend struct {
		x    [][]float64
		ids  []string
		p    []models.Prediction
		band bool
	}
	learners := map[string]models.Learner{}
	pending := map[string]pend{}
	var order []string
	for _, r := range recs {
		var v struct {
			ID     json.RawMessage `json:"id"`
			XRaw   json.RawMessage `json:"x"`
			X      []float64       `json:"-"`
			Y      *float64        `json:"y"`
			Reward *float64        `json:"reward"`
			Arm    json.RawMessage `json:"arm"`
			Arms   []struct {
				ID json.RawMessage `json:"id"`
				X  []float64       `json:"x"`
			} `json:"arms"`
		}
		if r.key == "" || json.Unmarshal([]byte(r.value), &v) != nil || v.ID == nil {
			continue // the scenarios' bad records: skipped here, dead-lettered there
		}
		if v.XRaw != nil {
			var sparse map[string]float64
			if json.Unmarshal(v.XRaw, &v.X) != nil {
				if json.Unmarshal(v.XRaw, &sparse) != nil {
					continue
				}
				v.X = make([]float64, spec.Dim)
				for k, f := range sparse {
					i, _ := strconv.Atoi(k)
					v.X[i] = f
				}
			}
			if len(v.X) != spec.Dim {
				continue
			}
		}
		l, ok := learners[r.key]
		if !ok {
			var err error
			if l, err = models.New(spec, r.key); err != nil {
				t.Fatal(err)
			}
			learners[r.key] = l
			order = append(order, r.key)
		}
		id := r.key + "/" + string(v.ID)
		switch {
		case v.X != nil:
			p := l.Predict(v.X)
			ref.yhat[id] = p.Value
			if v.Y != nil {
				y := *v.Y
				if loss.Classification() {
					y = models.Label(y)
				}
				_ = l.Update(v.X, p, y)
			} else {
				pending[id] = pend{x: [][]float64{v.X}, p: []models.Prediction{p}, ids: []string{""}}
			}
		case v.Arms != nil:
			arms := make([][]float64, len(v.Arms))
			for i, a := range v.Arms {
				arms[i] = a.X
			}
			if b, ok := l.(models.Bandit); ok {
				d := b.Choose(arms)
				ref.dec[id] = d
				ref.yhat[id] = d.Mean
				pending[id] = pend{x: [][]float64{arms[d.Arm]}, ids: []string{string(v.Arms[d.Arm].ID)}, p: []models.Prediction{{Value: d.Mean}}, band: true}
			} else {
				type sc struct {
					i int
					p models.Prediction
				}
				var s []sc
				for i, x := range arms {
					s = append(s, sc{i, l.Predict(x)})
				}
				sort.SliceStable(s, func(a, b int) bool { return s[a].p.Value > s[b].p.Value })
				k := min(topK, len(s))
				var pe pend
				for _, e := range s[:k] {
					ref.rank[id] = append(ref.rank[id], string(v.Arms[e.i].ID))
					pe.x = append(pe.x, arms[e.i])
					pe.p = append(pe.p, e.p)
					pe.ids = append(pe.ids, string(v.Arms[e.i].ID))
				}
				ref.yhat[id] = s[0].p.Value
				pending[id] = pe
			}
		default:
			pe, ok := pending[id]
			if !ok {
				continue
			}
			j := 0
			if v.Arm != nil {
				j = -1
				for i, a := range pe.ids {
					if a == string(v.Arm) {
						j = i
					}
				}
				if j < 0 {
					continue
				}
			}
			delete(pending, id)
			y := 0.0
			if v.Y != nil {
				y = *v.Y
				if loss.Classification() && !pe.band && len(pe.ids) == 1 && pe.ids[0] == "" {
					y = models.Label(y)
				}
			} else {
				y = *v.Reward
			}
			if pe.band {
				_ = l.(models.Bandit).Observe(pe.x[j], y)
			} else {
				_ = l.Update(pe.x[j], pe.p[j], y)
			}
		}
	}
	for _, k := range order {
		b, err := learners[k].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		ref.states[k] = b
	}
	return ref
}

// checkPredictions compares every expected prediction with the output (1e-12).
func checkPredictions(t *testing.T, ref reference, outs []outRecord) {
	t.Helper()
	got := distinctIDs(outs)
	for id, want := range ref.yhat {
		o, ok := got[id]
		if !ok {
			t.Errorf("no prediction for %s", id)
			continue
		}
		if o.YHat == nil || math.Abs(*o.YHat-want) > 1e-12 {
			t.Errorf("%s: y_hat %v, direct replay %v", id, o.YHat, want)
		}
	}
	if len(got) != len(ref.yhat) {
		t.Errorf("%d distinct predictions, want %d", len(got), len(ref.yhat))
	}
}

// checkStates compares the checkpointed learners with the direct replay.
func checkStates(t *testing.T, ref reference, dir string) {
	t.Helper()
	got := storedStates(t, dir)
	for k, want := range ref.states {
		if !bytes.Equal(got[k], want) {
			t.Errorf("key %s: checkpointed state (%d bytes) differs from the direct replay (%d bytes)", k, len(got[k]), len(want))
		}
	}
	if len(got) != len(ref.states) {
		t.Errorf("%d learners checkpointed, want %d", len(got), len(ref.states))
	}
}

// stream builds a scenario: nKeys keys, per key n feature records with ids
// 0..n-1; labels inline (every third), delayed on the input topic (arriving
// before the key's next x), or delayed and left pending.
func stream(nKeys, n, dim int, seed uint64) []testRecord {
	rng := models.NewRand(seed)
	var recs []testRecord
	for i := 0; i < n; i++ {
		for k := 0; k < nKeys; k++ {
			key := fmt.Sprintf("user-%d", k)
			x := make([]float64, dim)
			var y float64
			for j := range x {
				x[j] = 2*rng.Float64() - 1
				y += x[j] * float64(j+1) / float64(dim)
			}
			id := strconv.Itoa(i)
			label := testRecord{key: key, value: string(wire.AppendLabel(nil, id, y))}
			switch i % 3 {
			case 0:
				recs = append(recs, testRecord{key: key, value: string(wire.AppendLabeled(nil, id, x, y))})
			case 1:
				recs = append(recs, testRecord{key: key, value: string(wire.AppendFeatures(nil, id, x))}, label)
			default: // sparse x, which the encoders do not write
				f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
				recs = append(recs, testRecord{key: key, value: `{"id":"` + id + `","x":{"0":` + f(x[0]) + `,"2":` + f(x[2%dim]) + `}}`})
				if rng.Float64() < 0.7 { // delayed until after a later record of the key
					recs = append(recs, label)
				}
			}
		}
	}
	return recs
}

// logBuffer collects log lines (concurrency-safe).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), substr)
}

// hasLine reports whether one line holds every part.
func (l *logBuffer) hasLine(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(l.b.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// testLogLevel is raised to Debug when KS_TEST_DEBUG is set.
var testLogLevel = func() zerolog.Level {
	if os.Getenv("KS_TEST_DEBUG") != "" {
		return zerolog.DebugLevel
	}
	return zerolog.WarnLevel
}()

// waitDone waits until every expected id has a prediction and the processor
// has consumed every partition to its end (so that the labels after the last
// prediction are applied too).
func waitDone(t *testing.T, r *running, out *consumer, ref reference) []outRecord {
	t.Helper()
	outs := out.waitFor(90*time.Second, "all predictions", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(ref.yhat) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := r.p.Stats()
		if st.Lag == 0 && r.p.Ready() && len(st.Partitions) > 0 {
			return outs
		}
		if time.Now().After(deadline) {
			t.Fatalf("processor not caught up: lag %d, ready %v", st.Lag, r.p.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
