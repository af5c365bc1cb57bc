package kafkaio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Txn is a transactional producer: what it produces between Begin and Commit
// becomes visible to read_committed readers at once, or never. Its id names
// the producer across processes and restarts: Init by a new holder of the
// id fences every earlier one, whose later writes and commits fail with
// ErrFenced, and aborts the transaction such a zombie had open.
type Txn interface {
	// Init fences the earlier holders of the id. Call it before anything
	// else, and before reading what they wrote: their open transaction is
	// aborted by then.
	Init(ctx context.Context) error
	// Begin opens a transaction.
	Begin() error
	// Produce adds r to the open transaction (Cluster.Produce's contract;
	// done reports r written, not yet committed).
	Produce(ctx context.Context, r *Record, done func(*Record, error))
	// Commit makes the transaction's records visible, once every one is
	// written. On any failure the transaction is aborted (nothing of it
	// will ever be visible) and the error says why: ErrFenced,
	// ErrRecreated, or another error (retriable or not, per IsRetriable).
	Commit(ctx context.Context) error
	// Abort drops the open transaction.
	Abort(ctx context.Context) error
	// Close releases the producer; an open transaction is aborted by the
	// brokers after its timeout, or at once by the next Init of the id.
	Close()
}

// ErrFenced: a newer epoch of the transactional id exists (the partition
// has another owner, or the coordinator aborted a transaction that outlived
// its timeout); this producer can write nothing more.
var ErrFenced = errors.New("kafkaio: fenced: the transactional id has a newer producer epoch (another owner initialised it, or the coordinator aborted a transaction that outlived its timeout)")

// ErrRecreated: a topic the transaction wrote to was deleted and recreated
// meanwhile; what it acknowledged went with the old topic.
var ErrRecreated = errors.New("kafkaio: the topic was deleted and recreated under the transaction")

// DefaultTransactionTimeout is Options.TransactionTimeout's default.
const DefaultTransactionTimeout = time.Minute

// Transactional returns a transactional producer with the given id, with the
// client's connection and producer options, and TransactionCompression.
func (c *Client) Transactional(id string) (Txn, error) {
	po := c.opts
	po.Compression = po.TransactionCompression
	opts := append(c.opts.connOpts(), po.producerOpts()...)
	opts = append(opts, kgo.TransactionalID(id), kgo.TransactionTimeout(cmp.Or(c.opts.TransactionTimeout, DefaultTransactionTimeout)))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: transactional producer %q: %w", id, err)
	}
	return &txn{cl: cl, id: id}, nil
}

type txn struct {
	cl *kgo.Client
	id string

	mu     sync.Mutex
	failed error               // the first record of the open transaction that failed
	topics map[string]struct{} // the topics it wrote to
}

func (t *txn) Init(ctx context.Context) error {
	_, _, err := t.cl.ProducerID(ctx)
	return t.classify("init", err)
}

func (t *txn) Begin() error {
	t.mu.Lock()
	t.failed = nil
	t.mu.Unlock()
	return t.classify("begin", t.cl.BeginTransaction())
}

// Produce implements Txn. A record that fails makes the transaction fail:
// kgo would commit the others without it.
func (t *txn) Produce(ctx context.Context, r *Record, done func(*Record, error)) {
	t.mu.Lock()
	if _, ok := t.topics[r.Topic]; !ok {
		if t.topics == nil {
			t.topics = map[string]struct{}{}
		}
		t.topics[r.Topic] = struct{}{}
	}
	t.mu.Unlock()
	produce(ctx, t.cl, t, r, done)
}

// fail notes a record of the open transaction that failed.
func (t *txn) fail(r *Record, err error) {
	t.mu.Lock()
	if t.failed == nil {
		t.failed = fmt.Errorf("produce to %s/%d: %w", r.Topic, r.Partition, err)
	}
	t.mu.Unlock()
}

func (t *txn) Commit(ctx context.Context) error {
	err := t.cl.Flush(ctx)
	if err == nil {
		t.mu.Lock()
		err = t.failed
		t.mu.Unlock()
	}
	if err == nil {
		if err = t.cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
			return nil
		}
	}
	// Nothing of a transaction that did not commit may become visible:
	// abort it (a fenced producer's was aborted by its fencer).
	if abortErr := t.abort(); abortErr != nil && !isFenced(err) {
		err = errors.Join(err, abortErr)
	}
	err = t.classify("commit", err)
	if errors.Is(err, ErrRecreated) {
		// kgo keeps the old topic's id, and every produce to it fails,
		// until the topic is purged: the next transaction writes to the
		// new one.
		t.mu.Lock()
		topics := make([]string, 0, len(t.topics))
		for topic := range t.topics {
			topics = append(topics, topic)
		}
		t.mu.Unlock()
		t.cl.PurgeTopicsFromProducing(topics...)
	}
	return err
}

func (t *txn) Abort(context.Context) error { return t.classify("abort", t.abort()) }

// abortTimeout bounds an abort. Its context is not the caller's: an
// abort cut short by a context that already ended (a revoke) would leave
// the producer inside the transaction, unable to begin the next one.
const abortTimeout = 30 * time.Second

func (t *txn) abort() error {
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	if err := t.cl.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	return t.cl.EndTransaction(ctx, kgo.TryAbort)
}

func (t *txn) Close() { t.cl.Close() }

// isFenced: another producer initialised the id (PRODUCER_FENCED), or the
// epoch moved on (INVALID_PRODUCER_EPOCH): also what the coordinator does
// when it aborts a transaction that outlived its timeout. kgo may then
// re-initialise with the old epoch (KIP-588), but a coordinator cannot
// tell that from a zombie's, so neither case writes again: the partition
// fails, loudly, and its next owner (or this member after a restart)
// initialises afresh.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping)
}

// classify names the operation and maps kgo's errors onto the package's.
func (t *txn) classify(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case isFenced(err):
		return fmt.Errorf("transactional id %q: %s: %w: %w", t.id, op, ErrFenced, err)
	case errors.Is(err, kerr.UnknownTopicID):
		return fmt.Errorf("transactional id %q: %s: %w: %w", t.id, op, ErrRecreated, err)
	}
	return fmt.Errorf("transactional id %q: %s: %w", t.id, op, err)
}

// IsRetriable reports whether a produce or transaction error may go away by
// itself (a broker restarting, a leader moving, a timeout): the work is to
// be done again later. Fencing, a recreated topic, authorization, a record
// too large or an unknown topic are not.
func IsRetriable(err error) bool {
	if err == nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrRecreated) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable && !errors.Is(err, kerr.UnknownTopicOrPartition)
	}
	// Not a Kafka error code: a connection failure, a timeout, a context
	// that ended.
	return true
}
