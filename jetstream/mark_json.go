package jetstream

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
)

// appendMark appends m as encoding/json would marshal it, byte for byte
// (FuzzMarkJSON holds it to that), without reflection: the consumer writes
// a mark twice per applied event (lease, then commit), and json.Marshal
// was 4% of its CPU (BenchmarkConsumerDrain profile).
func appendMark(b []byte, m consumer.Mark) ([]byte, error) {
	b, ok := appendMarkFast(b, m)
	if !ok {
		// A time RFC 3339 cannot write: encoding/json gives the error.
		j, err := json.Marshal(m)
		return append(b, j...), err
	}
	return b, nil
}

// appendMarkFast returns ok false, and b as it was, for a time that
// RFC 3339 cannot write.
func appendMarkFast(b []byte, m consumer.Mark) (_ []byte, ok bool) {
	orig := b
	b, ok = event.AppendJSONTime(append(b, `{"at":`...), m.At)
	if !ok {
		return orig, false
	}
	if len(m.Keys) > 0 {
		b = append(b, `,"keys":[`...)
		for i, k := range m.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = event.AppendJSONString(b, k)
		}
		b = append(b, ']')
	}
	if l := m.Lease; l != nil {
		b = append(b, `,"lease":{"owner":`...)
		b = event.AppendJSONString(b, l.Owner)
		b = append(b, `,"key":`...)
		b = event.AppendJSONString(b, l.Key)
		if b, ok = event.AppendJSONTime(append(b, `,"until":`...), l.Until); !ok {
			return orig, false
		}
		if l.Redeliver {
			b = append(b, `,"redeliver":true`...)
		}
		b = append(b, '}')
	}
	if len(m.Grants) > 0 {
		// In key order, as encoding/json writes a map.
		b = append(b, `,"grants":{`...)
		for i, s := range slices.Sorted(maps.Keys(m.Grants)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(event.AppendJSONString(b, s), ':')
			b = strconv.AppendUint(b, m.Grants[s], 10)
		}
		b = append(b, '}')
	}
	return append(b, '}'), true
}
