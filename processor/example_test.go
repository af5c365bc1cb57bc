package processor_test

import (
	"fmt"

	"github.com/kernelstream/kernelstream/models"
	"github.com/kernelstream/kernelstream/processor"
)

// A processor is configured by one struct whose zero fields take the
// documented defaults; New validates it without touching the network or the
// disk, and Run (not called here) joins the group and processes until its
// context ends.
func ExampleNew() {
	spec, err := models.ParseSpec(`{"algorithm":"nons-ald","dim":18,"kernel":{"type":"gaussian","sigma":8}}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := processor.New(processor.Config{
		Brokers:       []string{"localhost:9092"},
		Group:         "kernelstream",
		InputTopic:    "features",
		OutputTopic:   "predictions",
		DLQTopic:      "dead-letters",
		Model:         spec,
		CheckpointDir: "/var/lib/kernelstream",
		// Everything else takes its default: checkpoints every 5s or 10,000
		// records, labels pending for up to 1h of event time, ...
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ready before Run:", p.Ready())
	// Output: ready before Run: false
}

// Validate names every field that is wrong.
func ExampleConfig_Validate() {
	spec, _ := models.ParseSpec(`{"algorithm":"aogd-ald","dim":5}`)
	cfg := processor.Config{
		Brokers: []string{"localhost:9092"}, Group: "kernelstream",
		InputTopic: "features", OutputTopic: "predictions",
		Model: spec, CheckpointDir: "/var/lib/kernelstream",
	}
	fmt.Println(cfg.Validate())
	// Output: processor: DLQTopic: required
}
