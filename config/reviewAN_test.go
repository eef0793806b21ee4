package config

import "testing"

// TestReviewANForwardURLBadPortCaught: a forward.url whose port can never
// be dialled (a typo like :80800, or :0) passes `config check` and serve's
// start; every event is then POSTed, fails with "dial tcp: address 80800:
// invalid port", is retried as a connection error max_deliver times
// (about 33 minutes with the default backoff) and dead-lettered. The same
// typo in http.listen is caught ("port ... is not a number from 0 to
// 65535"). CONTRACT (Command line): config check "validates; one line per
// problem naming the key".
func TestReviewANForwardURLBadPortCaught(t *testing.T) {
	for _, u := range []string{"http://receiver.internal:80800/hook", "https://127.0.0.1:0/hook"} {
		t.Run(u, func(t *testing.T) {
			c := mustParse(t, baseYAML, nil)
			p := c.Providers["p"]
			p.Effects.Forward.URL = u
			c.Providers["p"] = p
			if _, ok := findProblem(c.Check(), "providers.p.effects.forward.url", ""); !ok {
				t.Errorf("config check of forward.url %q: no problem reported under providers.p.effects.forward.url; got %v", u, c.Check())
			}
		})
	}
}
