package processor

import (
	"strings"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// propagated returns the input headers that Config.PropagateHeaders names,
// for the prediction of that input (trace context, tenant ids), appended
// to out (the emitter copies them: out is reused).
func (w *worker) propagated(out, in []kafkaio.Header) []kafkaio.Header {
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
