package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// lostShownFor is how long status lists events lost to WEBHOOKS' max_age
// as a problem after a serve told them: long enough for a weekly look to
// see it; AUDIT keeps the records themselves.
const lostShownFor = 7 * 24 * time.Hour

// streamFullShare is the disk use, in percent of max_bytes, from which a
// stream that refuses writes when full (WEBHOOKS: senders get 503; GRANTS
// and DLQ: events wait) counts as a problem.
const streamFullShare = 90

// fullMeans says what a full stream holds up (the DLQ line once went
// quiet in the log while the events it held waited; a resource audit,
// stop 39).
var fullMeans = map[string]string{
	jetstream.StreamWebhooks: ": once full, webhooks are answered 503",
	jetstream.StreamGrants:   ": once full, events that publish fail and are dead-lettered after consumer.max_deliver attempts",
	jetstream.StreamDLQ:      ": once full, events to dead-letter wait unapplied (or remove letters: hookgate dlq remove)",
}

// fullNow is fullMeans for a stream that is full already (streamFull):
// "once full" read as "not yet" while every webhook was answered 503 (an
// operations audit, stop 41).
var fullNow = map[string]string{
	jetstream.StreamWebhooks: ": full, so webhooks are answered 503 now",
	jetstream.StreamGrants:   ": full, so events that publish fail now and are dead-lettered after consumer.max_deliver attempts",
	jetstream.StreamDLQ:      ": full, so events to dead-letter wait unapplied now (or remove letters: hookgate dlq remove)",
}

// streamFull reports whether a stream with a byte limit has less room
// left than two of its messages take on average: the next write is
// refused, or about to be.
func streamFull(s jetstream.StreamStatus) bool {
	if s.MaxBytes <= 0 || s.Messages == 0 {
		return false
	}
	room := max(s.MaxBytes-int64(s.Bytes), 0)
	return uint64(room) < 2*(s.Bytes/s.Messages)
}

// statusProblems lists, one short line each, what in a status needs a
// person: an instance not ready, no serve running, none applying (with
// the consumer role, or only gateways while nothing pulls) or more than
// one, a forward receiver's Retry-After pause, a stream, bucket or the
// durable consumer missing, an unapplied event past half of WEBHOOKS's
// max_age, events lost at that max_age in the last lostShownFor, dead
// letters, events handed back for a retry or delivered again and not yet
// settled (failing effects), a stream full now or that refuses writes
// near its max_bytes. Empty when none; AUDIT ages out its oldest
// records when full, so its use is no problem.
func statusProblems(st jetstream.Status, inst instancesView) []string {
	problems := instanceProblems(inst)
	for _, s := range st.Streams {
		if !s.Exists {
			problems = append(problems, "stream "+s.Name+" missing")
			continue
		}
		if n := len(s.ReplicasOffline); n > 0 {
			// Review BI: with a node down status said "PROBLEMS none".
			problems = append(problems, fmt.Sprintf("stream %s: replica %s offline or silent for 10s or more (it runs on %d of %d; NATS node down?)",
				s.Name, strings.Join(s.ReplicasOffline, ", "), s.Replicas-n, s.Replicas))
		}
		// Full now at any share: a small max_bytes holds few messages, and
		// one refused below 90% read "PROBLEMS none" while every webhook
		// was answered 503 (audit 42: at 85%).
		if pct, ok := s.DiskUse(); ok && (pct >= streamFullShare || streamFull(s)) && s.Name != jetstream.StreamAudit {
			means := fullMeans[s.Name]
			if streamFull(s) {
				means = fullNow[s.Name]
			}
			problems = append(problems, fmt.Sprintf("stream %s at %.1f%% of its max_bytes (retention.%s.max_bytes, read at start: raise it and restart serve)%s",
				s.Name, pct, strings.ToLower(s.Name), means))
		}
	}
	for _, b := range st.Buckets {
		if !b.Exists {
			problems = append(problems, "bucket "+b.Name+" missing")
			continue
		}
		if n := len(b.ReplicasOffline); n > 0 {
			problems = append(problems, fmt.Sprintf("bucket %s: replica %s offline or silent for 10s or more (it runs on %d of %d; NATS node down?)",
				b.Name, strings.Join(b.ReplicasOffline, ", "), b.Replicas-n, b.Replicas))
		}
	}
	if st.ConsumersUnlisted != "" {
		problems = append(problems, st.ConsumersUnlisted)
	}
	if len(st.Consumers) > 0 && !st.Consumers[0].Exists {
		problems = append(problems, "consumer "+st.Consumers[0].Stream+"/"+st.Consumers[0].Name+" missing: nothing applies events")
	} else if n := len(inst.Docs); n > 0 && !slices.ContainsFunc(inst.Docs, func(d instanceDoc) bool { return slices.Contains(d.Roles, "consumer") }) &&
		len(st.Consumers) > 0 && idle(st.Consumers[0]) {
		// Gateways only (a rollout with roles.consumer false, the
		// consumer half of a split not started again): "PROBLEMS none"
		// while events piled up (an operations audit, stop 41). A
		// consumer serve that does not answer (NATS permissions) but
		// runs keeps a pull waiting: not this.
		waiting := st.Consumers[0].NumPending + uint64(max(st.Consumers[0].NumAckPending, 0))
		problems = append(problems, fmt.Sprintf("no instance applies events: none of the %s that answered has the consumer role (roles.consumer), nothing pulls from %s, and %s there",
			counted(n, "serve", "serves"), st.Consumers[0].Stream, counted(waiting, "event waits", "events wait")))
	}
	if c := st.Consumers; len(c) > 0 && c[0].Exists && c[0].NumRedelivered == 0 {
		// Failed once, not yet delivered again: the line below counts
		// only events delivered again (audit 42).
		for _, d := range inst.Docs {
			if d.Retrying > 0 {
				problems = append(problems, fmt.Sprintf("on %s, %s to be tried again (a failed try waiting out its backoff, or a subject held elsewhere): the serve log's warnings say why",
					d.Instance, counted(d.Retrying, "event waits", "events wait")))
			}
		}
	} else if len(c) > 0 && c[0].Exists {
		// A forward receiver refusing every event read "PROBLEMS none" for
		// the half hour of retries before the first dead letter (a 3 a.m.
		// audit, stop 38).
		problems = append(problems, fmt.Sprintf("%d events delivered again and not yet settled (an effect failed and waits for its retry, or the redelivery after a restart): the serve log's warnings say why; hookgate_consumer_events_total{decision=\"retry\"} counts the retries",
			c[0].NumRedelivered))
	}
	if p := agingOut(st); p != "" {
		problems = append(problems, p)
	}
	if r := st.LastExpired; r != nil && st.At.Sub(r.Time) < lostShownFor {
		problems = append(problems, fmt.Sprintf("events lost to WEBHOOKS' max_age, told %s: %s (AUDIT %s; shown for %s)",
			r.Time.UTC().Format(time.RFC3339), r.Reason, r.Decision, shortDuration(lostShownFor)))
	}
	if n := st.Stream(jetstream.StreamDLQ).Messages; n > 0 {
		problems = append(problems, fmt.Sprintf("%d dead letters in DLQ (hookgate dlq list)", n))
	}
	return problems
}

// idle reports whether nothing pulls from a consumer that has events to
// deliver or deliveries outstanding: no pull waiting. (Outstanding
// deliveries do not say a consumer runs: one that stopped while an event
// waited for its retry leaves it so for good; review of stop 41.) A
// consumer that runs keeps a pull waiting but for the moments its window
// is full.
func idle(c jetstream.ConsumerStatus) bool {
	return c.Exists && (c.NumPending > 0 || c.NumAckPending > 0) && c.NumWaiting == 0
}

// instanceProblems are statusProblems' lines about the running serves.
func instanceProblems(inst instancesView) []string {
	problems := []string{}
	if len(inst.Docs) == 0 {
		problems = append(problems, "no serve answered: "+inst.None)
	}
	consumers, paused := 0, 0
	var appliers []string
	for _, in := range inst.Docs {
		for _, provider := range slices.Sorted(maps.Keys(in.ForwardPaused)) {
			// Waiting untried is not "delivered again": PROBLEMS read
			// none for the whole pause (an operations audit, stop 41).
			problems = append(problems, fmt.Sprintf("provider %s's forward receiver asked to be left alone (429 or 503 with Retry-After) until %s: its events wait, untried, on %s",
				provider, in.ForwardPaused[provider].UTC().Format(time.RFC3339), in.Instance))
		}
		if !in.Ready {
			p := "instance " + in.Instance + " not ready"
			if in.Problem != "" {
				p += ": " + in.Problem
			}
			problems = append(problems, p)
		}
		if slices.Contains(in.Roles, "consumer") {
			consumers++
		}
		if in.Applying {
			appliers = append(appliers, in.Instance)
		}
		if in.Paused {
			paused++
		}
	}
	applying := len(appliers) > 0
	switch {
	case len(appliers) > 1:
		// Each would get some of a subject's events, and apply a newer
		// one before an older (audit 42: a consumer-only serve with
		// nats.url at an embedded hookgate's listen read PROBLEMS none).
		problems = append(problems, fmt.Sprintf("%d instances apply events at once (%s): only the holder of the consumer lock should; one of them does not take it (an embedded serve before stop 42?)",
			len(appliers), strings.Join(appliers, ", ")))
	case consumers > 0 && !applying && paused > 0:
		// Not stuck: a backup reads the streams (hookgate backup).
		problems = append(problems, fmt.Sprintf("consumer paused by a running hookgate backup (%d of %d instances with the consumer role): events wait in WEBHOOKS until it ends (the pause of a backup that died runs out within a minute)", paused, consumers))
	case consumers > 0 && !applying:
		// On a cluster one of them holds the consumer lock; none holding
		// it (all standing by, the lock stuck) applies nothing.
		problems = append(problems, fmt.Sprintf("no instance applies events (%d with the consumer role answered, none applying)", consumers))
	}
	return problems
}

// agingOut says when the oldest unapplied event has waited past half of
// WEBHOOKS's max_age: at max_age the stream deletes it, applied or not,
// and nothing applies it any more (review AS: lost without a trace).
func agingOut(st jetstream.Status) string {
	if len(st.Consumers) == 0 || st.Consumers[0].OldestUnapplied.IsZero() {
		return ""
	}
	maxAge := st.Stream(jetstream.StreamWebhooks).MaxAge
	age := st.At.Sub(st.Consumers[0].OldestUnapplied)
	if maxAge <= 0 || age < maxAge/2 {
		return ""
	}
	return fmt.Sprintf("the oldest unapplied event was stored %s ago; WEBHOOKS deletes events after %s (retention.webhooks.max_age), applied or not: it is lost at %s unless the consumer catches up",
		shortDuration(age), shortDuration(maxAge), st.Consumers[0].OldestUnapplied.Add(maxAge).UTC().Format(time.RFC3339))
}
