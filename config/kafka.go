package config

import (
	"net"
	"time"

	"github.com/segmentio/kafka-go"
)

// dialTimeout bounds one connection attempt to a broker; the processor
// retries with backoff above it.
const dialTimeout = 10 * time.Second

// Clients builds the kafka-go Dialer (consumer group, readers) and Transport
// (writers) with the TLS and SASL settings of kafka.tls and kafka.sasl.
func (k Kafka) Clients() (*kafka.Dialer, *kafka.Transport, error) {
	tc, err := k.TLSConfig()
	if err != nil {
		return nil, nil, err
	}
	mech, err := k.SASLMechanism()
	if err != nil {
		return nil, nil, err
	}
	dialer := &kafka.Dialer{
		ClientID:      k.ClientID,
		Timeout:       dialTimeout,
		DualStack:     true,
		TLS:           tc,
		SASLMechanism: mech,
	}
	transport := &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: dialTimeout}).DialContext,
		DialTimeout: dialTimeout,
		ClientID:    k.ClientID,
		TLS:         tc,
		SASL:        mech,
	}
	return dialer, transport, nil
}
