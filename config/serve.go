package config

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"
)

// Advertised is the scoring address the other members use to reach this
// one: serve.advertised_addr, else serve.addr's host (unless it is
// unspecified: ":8081", "0.0.0.0:8081") or the host name, with serve.addr's
// port; "" when the endpoint is off.
func (s Serve) Advertised() string {
	if s.Addr == "" {
		return ""
	}
	if s.AdvertisedAddr != "" {
		return s.AdvertisedAddr
	}
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host, _ = os.Hostname()
	}
	return net.JoinHostPort(host, port)
}

// ServeSecurity is what the scoring endpoint needs from the serve keys'
// files: its TLS configuration (nil = plain HTTP), the configuration of the
// client that forwards requests to other members (nil = plain HTTP), and
// the bearer token (nil = none).
type ServeSecurity struct {
	Server *tls.Config
	Client *tls.Config
	Token  []byte
}

// Security reads the certificates, CAs and token the serve keys name.
// Errors name the key whose file is at fault.
func (s Serve) Security() (ServeSecurity, error) {
	var sec ServeSecurity
	if s.TokenFile != "" {
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return sec, fmt.Errorf("serve.token_file: %w", err)
		}
		sec.Token = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(sec.Token) == 0 {
			return sec, fmt.Errorf("serve.token_file: %s is empty", s.TokenFile)
		}
	}
	if s.TLSCert == "" {
		return sec, nil
	}
	pair, err := tls.LoadX509KeyPair(s.TLSCert, s.TLSKey)
	if err != nil {
		return sec, fmt.Errorf("serve.tls_cert/tls_key: %w", err)
	}
	sec.Server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	sec.Client = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if s.ClientCA != "" {
		pool, err := readCAs("serve.client_ca", s.ClientCA)
		if err != nil {
			return sec, err
		}
		sec.Server.ClientCAs, sec.Server.ClientAuth = pool, tls.RequireAndVerifyClientCert
		sec.Client.RootCAs = pool
	}
	if s.PeerCA != "" {
		pool, err := readCAs("serve.peer_ca", s.PeerCA)
		if err != nil {
			return sec, err
		}
		sec.Client.RootCAs = pool
	}
	return sec, nil
}
