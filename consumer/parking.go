package consumer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// parking keeps a subject's events in stream order across hand-backs. An
// event handed back untried (its subject in doubt, its store not
// answering) comes back after handBackDelay; meanwhile newer events of its
// subject keep arriving from the stream, and applying one of them first
// would turn it stale. So until it comes back (or parkTTL passes, should
// it be delivered elsewhere), an event of its subject with a higher
// WEBHOOKS sequence is handed back behind it. JetStream redelivers events
// handed back with one delay in the order their delays run out, so they
// come back in stream order. (Found by TestConsumerHolderKill9KeepsEachSubjectsOrder:
// a standby handed back the dead holder's events while the subject waited
// for the in-doubt one, then applied newer events fetched meanwhile.)
//
// Safe for concurrent use; bounded like markCache.
type parking struct {
	mu  sync.Mutex
	max int
	m   map[string]map[uint64]parked // lease key -> WEBHOOKS sequence -> event
}

type parked struct {
	at       time.Time // handed back at
	key      string
	occurred time.Time
}

// parkTTL is how long a parked event holds its subject's newer events back.
const parkTTL = 10 * handBackDelay

func newParking(max int) *parking {
	return &parking{max: max, m: make(map[string]map[uint64]parked)}
}

func (p *parking) park(lease string, seq uint64, ev parked) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[lease]
	if s == nil {
		if len(p.m) >= p.max {
			clear(p.m)
		}
		s = make(map[uint64]parked)
		p.m[lease] = s
	}
	s[seq] = ev
}

// arrived takes seq out of lease's parked events (it came back) and
// returns the parked events older than it in the stream.
func (p *parking) arrived(lease string, seq uint64, now time.Time) map[uint64]parked {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[lease]
	if s == nil {
		return nil
	}
	delete(s, seq)
	var older map[uint64]parked
	for q, e := range s {
		if now.Sub(e.at) > parkTTL {
			delete(s, q)
			continue
		}
		if q < seq {
			if older == nil {
				older = map[uint64]parked{}
			}
			older[q] = e
		}
	}
	if len(s) == 0 {
		delete(p.m, lease)
	}
	return older
}

// drop forgets a parked event decided elsewhere.
func (p *parking) drop(lease string, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.m[lease]; s != nil {
		delete(s, seq)
		if len(s) == 0 {
			delete(p.m, lease)
		}
	}
}

// behindHandBack hands m back when an older event of its subject was handed
// back and has not come back yet; done reports that it did. An older event
// the subject's mark already covers (another instance decided it) holds
// nothing back, and nothing holds back the event the subject's lease names.
func (p *Processor) behindHandBack(ctx context.Context, m *Message) (Outcome, bool) {
	ev := m.Event
	if ev.Seq == 0 || ev.Subject == "" || !p.rules[ev.Provider].Watermark || m.stopping() {
		return Outcome{}, false
	}
	lease := LeaseKey(ev)
	older := p.parked.arrived(lease, ev.Seq, p.opts.Now())
	if len(older) == 0 {
		return Outcome{}, false
	}
	mark, _, err := p.readMark(ctx, lease)
	if err != nil || (mark.Lease != nil && mark.Lease.Key == ev.Key) {
		// A store error: decided by the usual path, which reads it too.
		// The event the subject's lease names (in doubt, the others
		// handed back to wait for it) must not wait behind them.
		return Outcome{}, false
	}
	first := uint64(0)
	for q, e := range older {
		if e.occurred.Before(mark.At) || (e.occurred.Equal(mark.At) && slices.Contains(mark.Keys, e.key)) {
			p.parked.drop(lease, q)
			continue
		}
		if first == 0 || q < first {
			first = q
		}
	}
	if first == 0 {
		return Outcome{}, false
	}
	out := p.retry(m, fmt.Errorf("subject waits for WEBHOOKS seq %d, handed back before it", first), false)
	out.transient = false
	p.handBack(m, handBackDelay)
	return out, true
}
