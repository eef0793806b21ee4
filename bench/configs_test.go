package bench

import (
	"testing"

	"github.com/hookgate/hookgate/config"
)

// Every configuration's generated hookgate config is valid, and -workers
// reaches consumer.workers; without it hookgate's default applies, the
// one the floor's consumer is given (hookgateWorkers).
func TestHookgateYAML(t *testing.T) {
	for _, c := range Configurations(0.5, 0.5) {
		if c.Floor {
			continue
		}
		for _, workers := range []int{0, 32} {
			c.Workers = workers
			y := c.HookgateYAML(t.TempDir(), 1<<20, 4222, "tok")
			if err := CheckHookgateYAML(y); err != nil {
				t.Fatalf("%s, workers %d: %v\n%s", c.Name, workers, err, y)
			}
			cfg, err := config.Parse(y, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			want := hookgateWorkers
			if workers > 0 {
				want = workers
			}
			if cfg.Consumer.Workers != want || cfg.Roles.Consumer != c.EndToEnd {
				t.Fatalf("%s, workers %d: consumer.workers %d, roles.consumer %t", c.Name, workers, cfg.Consumer.Workers, cfg.Roles.Consumer)
			}
		}
	}
}
