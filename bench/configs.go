package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// Configuration is one server setup the harness measures.
type Configuration struct {
	Name  string // short, for flags and JSON: floor, hmac, standard, redeliver, digest, e2e
	Label string // for the table and the plot
	Floor bool   // the floor server instead of hookgate
	// Scheme, Secret and Header sign the requests (and configure hookgate).
	Scheme string
	Secret string
	Header string
	// EventID is the provider's event_id list; empty means digest keys.
	EventID []string
	// Redeliver is the share of requests that repeat an earlier one.
	Redeliver float64
	// EndToEnd runs the consumer too and waits for GRANTS to catch up.
	EndToEnd bool
	// Workers sets consumer.workers when > 0.
	Workers int
	// Pace, when > 0, paces the load (open loop) at this share of the
	// rate its gateway (Peak) reached in the same round: the end-to-end
	// run that asks whether the consumer keeps up at it.
	Pace float64
}

// Peak is the configuration whose rate in the same round is c's gateway's
// peak: what a paced c is paced against and its consumer compared with.
// The floor's end to end is held to the floor's own peak, the way
// hookgate's is held to the hmac gateway's.
func (c Configuration) Peak() string {
	if c.Floor {
		return "floor"
	}
	return "hmac"
}

const (
	hmacSecret     = "bench-hmac-secret-not-for-production"
	standardSecret = "whsec_YmVuY2gtc3RhbmRhcmQtd2ViaG9va3Mtc2VjcmV0" // base64("bench-standard-webhooks-secret")
	// BenchProvider is the provider every configuration posts to.
	BenchProvider = "bench"
)

// Configurations returns the setups of issue 6, the floor first, then the
// end-to-end one paced at pace times the hmac configuration's rate and
// the floor's end to end paced at pace times the floor's (0 leaves both
// out). redeliveries is the share of redeliveries of the "redeliver"
// setup.
func Configurations(redeliveries, pace float64) []Configuration {
	hmac := Configuration{Scheme: gateway.SchemeHMACSHA256, Secret: hmacSecret, Header: "X-Signature", EventID: []string{"json:/id"}}
	with := func(c Configuration, name, label string, f func(*Configuration)) Configuration {
		c.Name, c.Label = name, label
		if f != nil {
			f(&c)
		}
		return c
	}
	cs := []Configuration{
		with(hmac, "floor", "floor (POST -> sync publish, Nats-Msg-Id)", func(c *Configuration) { c.Floor = true }),
		with(hmac, "hmac", "hookgate hmac-sha256, json id", nil),
		with(hmac, "standard", "hookgate standard-webhooks", func(c *Configuration) {
			c.Scheme, c.Secret, c.Header, c.EventID = gateway.SchemeStandardWebhooks, standardSecret, "", []string{"header:webhook-id"}
		}),
		with(hmac, "redeliver", fmt.Sprintf("hookgate hmac, %.0f%% redeliveries", redeliveries*100), func(c *Configuration) { c.Redeliver = redeliveries }),
		with(hmac, "digest", "hookgate hmac, digest keys (no id)", func(c *Configuration) { c.EventID = []string{} }),
		with(hmac, "e2e", "end to end: gateway + consumer -> GRANTS", func(c *Configuration) { c.EndToEnd = true }),
	}
	if pace > 0 {
		cs = append(cs, with(hmac, "sustained", fmt.Sprintf("end to end, paced at %.2gx the hmac rate", pace), func(c *Configuration) {
			c.EndToEnd, c.Pace = true, pace
		}))
		// The same question for the least pipeline: can any consumer
		// applying a watermark and a publish keep up here?
		cs = append(cs, with(hmac, "floor-sustained", fmt.Sprintf("floor + least consumer, paced at %.2gx", pace), func(c *Configuration) {
			c.Floor, c.EndToEnd, c.Pace = true, true, pace
		}))
	}
	return cs
}

// Signer returns the scheme that signs this configuration's requests:
// hookgate's own implementation.
func (c Configuration) Signer() (gateway.Scheme, error) {
	return gateway.NewScheme(c.Scheme, gateway.SchemeOptions{Header: c.Header})
}

// HookgateYAML is the hookgate config for this configuration: embedded
// NATS in dataDir, HTTP on any loopback port, one provider. natsPort > 0
// also lets TCP clients in with token (the end-to-end run reads GRANTS
// and the consumer's lag through it).
func (c Configuration) HookgateYAML(dataDir string, maxBody int64, natsPort int, token string) []byte {
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "http:\n  listen: \"127.0.0.1:0\"\n  max_body_bytes: %d\n", maxBody)
	fmt.Fprintf(&b, "nats:\n  url: \"\"\n  embedded:\n    data_dir: %s\n", q(dataDir))
	if natsPort > 0 {
		fmt.Fprintf(&b, "    listen: \"127.0.0.1:%d\"\n    token: %s\n", natsPort, q(token))
	}
	b.WriteString("dedup:\n  horizon: 96h\n  window: 2m\n")
	fmt.Fprintf(&b, "roles:\n  gateway: true\n  consumer: %t\n", c.EndToEnd)
	if c.Workers > 0 {
		fmt.Fprintf(&b, "consumer:\n  workers: %d\n", c.Workers)
	}
	fmt.Fprintf(&b, "providers:\n  %s:\n    signature:\n      scheme: %s\n      secrets: [%s]\n", BenchProvider, c.Scheme, q(c.Secret))
	if c.Header != "" {
		fmt.Fprintf(&b, "      header: %s\n", q(c.Header))
	}
	ids := make([]string, len(c.EventID))
	for i, s := range c.EventID {
		ids[i] = q(s)
	}
	fmt.Fprintf(&b, "    event_id: [%s]\n", strings.Join(ids, ", "))
	b.WriteString("    subject: \"json:/grant_id\"\n    occurred_at: \"json:/occurred_at\"\n    type: \"json:/type\"\n")
	return []byte(b.String())
}

// CheckHookgateYAML parses and validates a generated config with
// hookgate's own config package, so a harness bug shows as a config
// problem and not as a server that never starts.
func CheckHookgateYAML(data []byte) error {
	cfg, err := config.Parse(data, "", nil)
	if err != nil {
		return err
	}
	return cfg.Validate()
}
