package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/processor"
)

// TestProcessorConfigMapsEveryKey: every setting reaches processor.Config,
// the result passes the processor's own validation, and TLS/SASL land in
// both the Dialer and the Transport.
func TestProcessorConfigMapsEveryKey(t *testing.T) {
	c, err := Parse([]byte(validYAML), "cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.Kafka.TLS = TLS{Enabled: true, InsecureSkipVerify: true, ServerName: "kafka.internal"}
	c.Kafka.SASL = SASL{Mechanism: "scram-sha-256", Username: "u", Password: "p"}
	c.Kafka.InstanceID = "pod-3"
	c.State.KeyTTL = 72 * time.Hour
	c.Changelog.StandbyReplicas = 2
	c.Kafka.SessionTimeout, c.Kafka.HeartbeatInterval, c.Kafka.RebalanceTimeout = 7*time.Second, 700*time.Millisecond, 9*time.Second
	c.Kafka.RetryBackoffMax, c.Kafka.MaxValueBytes, c.Output.BatchTimeout = 3*time.Second, 12345, 7*time.Millisecond
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := c.ProcessorConfig(zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("processor rejects the mapped config: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Brokers", p.Brokers, c.Kafka.Brokers},
		{"Group", p.Group, c.Kafka.Group},
		{"InputTopic", p.InputTopic, c.Kafka.InputTopic},
		{"OutputTopic", p.OutputTopic, c.Kafka.OutputTopic},
		{"DLQTopic", p.DLQTopic, c.Kafka.DLQTopic},
		{"LabelsTopic", p.LabelsTopic, c.Kafka.LabelsTopic},
		{"StartOffset", p.StartOffset, c.Kafka.StartOffset},
		{"Model", p.Model, c.Model},
		{"CheckpointDir", p.CheckpointDir, c.Checkpoint.Dir},
		{"CheckpointInterval", p.CheckpointInterval, c.Checkpoint.Interval},
		{"CheckpointMaxRecords", p.CheckpointMaxRecords, c.Checkpoint.MaxRecords},
		{"CheckpointMemTableMiB", p.CheckpointMemTableMiB, c.Checkpoint.MemTableMiB},
		{"LabelsTTL", p.LabelsTTL, c.Labels.TTL},
		{"KeyTTL", p.KeyTTL, c.State.KeyTTL},
		{"Changelog.StandbyReplicas", p.Changelog.StandbyReplicas, c.Changelog.StandbyReplicas},
		{"MaxPending", p.MaxPending, c.Labels.MaxPending},
		{"MaxLearners", p.MaxLearners, c.Cache.MaxLearners},
		{"TopK", p.TopK, c.Output.TopK},
		{"MaxValueBytes", p.MaxValueBytes, c.Kafka.MaxValueBytes},
		{"ShutdownGrace", p.ShutdownGrace, c.Shutdown.Grace},
		{"BatchTimeout", p.BatchTimeout, c.Output.BatchTimeout},
		{"SessionTimeout", p.SessionTimeout, c.Kafka.SessionTimeout},
		{"HeartbeatInterval", p.HeartbeatInterval, c.Kafka.HeartbeatInterval},
		{"RebalanceTimeout", p.RebalanceTimeout, c.Kafka.RebalanceTimeout},
		{"RetryBackoffMax", p.RetryBackoffMax, c.Kafka.RetryBackoffMax},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if p.TLS == nil || p.TLS.ServerName != "kafka.internal" || p.ClientID != c.Kafka.ClientID || p.IsolationLevel != c.Kafka.IsolationLevel {
		t.Errorf("TLS = %+v, ClientID %q, IsolationLevel %q", p.TLS, p.ClientID, p.IsolationLevel)
	}
	if p.SASL == nil || p.SASL.Mechanism != "scram-sha-256" || p.SASL.Username != c.Kafka.SASL.Username || p.SASL.Password != c.Kafka.SASL.Password.Reveal() {
		t.Errorf("SASL = %+v", p.SASL)
	}
	if len(p.GroupBalancers) == 0 {
		t.Fatal("no balancers")
	}
	sticky, ok := p.GroupBalancers[0].(*processor.StickyBalancer)
	if !ok || sticky.Identity() != "pod-3" {
		t.Errorf("first balancer = %#v, want the sticky balancer of pod-3", p.GroupBalancers[0])
	}
}

func TestMemberIdentity(t *testing.T) {
	t.Setenv("POD_NAME", "kernelstream-7")
	if got := MemberIdentity(); got != "kernelstream-7" {
		t.Fatalf("MemberIdentity() = %q with POD_NAME set", got)
	}
	t.Setenv("POD_NAME", "")
	if got := MemberIdentity(); got == "" {
		t.Fatal("MemberIdentity() empty without POD_NAME: want the host name")
	}
}
