package processor

import (
	"strings"

	"github.com/segmentio/kafka-go"
)

// propagated returns the input headers that Config.PropagateHeaders names,
// for the prediction of that input (trace context, tenant ids). It
// allocates only when a header is copied.
func (w *worker) propagated(in []kafka.Header) []kafka.Header {
	var out []kafka.Header
	for _, h := range in {
		for _, name := range w.cfg.PropagateHeaders {
			if strings.EqualFold(h.Key, name) {
				out = append(out, h)
				break
			}
		}
	}
	return out
}
