package processor

import (
	"fmt"
	"sync"
	"time"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// Event is something an operator must know of that did not stop
// processing: a log truncation detected under a partition being read, or a
// position out of the log's range that OffsetReset decided. Each is also
// logged at warn level and counted; /readyz lists the latest.
type Event struct {
	Time      time.Time
	Kind      string // "truncation" or "offset_reset"
	Topic     string
	Partition int
	Detail    string
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s %s/%d: %s", e.Time.UTC().Format(time.RFC3339), e.Kind, e.Topic, e.Partition, e.Detail)
}

// maxEvents is how many events Events keeps.
const maxEvents = 16

type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == maxEvents {
		copy(l.events, l.events[1:])
		l.events = l.events[:maxEvents-1]
	}
	l.events = append(l.events, e)
}

// Events returns the latest events, oldest first.
func (p *Processor) Events() []Event {
	p.events.mu.Lock()
	defer p.events.mu.Unlock()
	return append([]Event(nil), p.events.events...)
}

func (p *Processor) noteTruncation(topic string, part int, consumedTo, resetTo int64) {
	p.events.add(Event{Time: time.Now(), Kind: "truncation", Topic: topic, Partition: part,
		Detail: fmt.Sprintf("the log was truncated below the position: consumed to offset %d, resumed at %d", consumedTo, resetTo)})
}

func (p *Processor) noteReset(topic string, part int, off int64, r kafkaio.Range, policy string) {
	p.events.add(Event{Time: time.Now(), Kind: "offset_reset", Topic: topic, Partition: part,
		Detail: fmt.Sprintf("offset %d out of the log's range [%d, %d]: policy %s applied", off, r.Start, r.End, policy)})
}
