package config

import (
	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"
)

// String renders the configuration as YAML with the secrets redacted (the
// Secret type redacts itself), so that printing or logging a Config never
// leaks kafka.sasl.password.
func (c Config) String() string {
	b, err := yaml.Marshal(c)
	if err != nil {
		return "config: " + err.Error()
	}
	return string(b)
}

// GoString makes %#v print the redacted form too.
func (c Config) GoString() string { return c.String() }

// MarshalZerologObject logs the settings an operator looks for at start-up,
// secrets redacted: log.Info().Object("config", cfg).
func (c Config) MarshalZerologObject(e *zerolog.Event) {
	e.Strs("brokers", c.Kafka.Brokers).
		Str("group", c.Kafka.Group).
		Str("client_id", c.Kafka.ClientID).
		Str("instance_id", c.Kafka.InstanceID).
		Str("input_topic", c.Kafka.InputTopic).
		Str("output_topic", c.Kafka.OutputTopic).
		Str("dlq_topic", c.Kafka.DLQTopic).
		Str("labels_topic", c.Kafka.LabelsTopic).
		Str("start_offset", c.Kafka.StartOffset).
		Bool("tls", c.Kafka.TLS.Enabled).
		Str("sasl_mechanism", c.Kafka.SASL.Mechanism).
		Str("sasl_username", c.Kafka.SASL.Username).
		Str("sasl_password", c.Kafka.SASL.Password.String()).
		Str("sasl_password_file", c.Kafka.SASL.PasswordFile).
		Str("algorithm", c.Model.Algorithm).
		Int("dim", c.Model.Dim).
		Str("checkpoint_dir", c.Checkpoint.Dir).
		Dur("checkpoint_interval", c.Checkpoint.Interval).
		Int("checkpoint_max_records", c.Checkpoint.MaxRecords).
		Dur("labels_ttl", c.Labels.TTL).
		Int("labels_max_pending", c.Labels.MaxPending).
		Int("max_learners", c.Cache.MaxLearners).
		Str("http_addr", c.HTTP.Addr).
		Dur("shutdown_grace", c.Shutdown.Grace)
}
