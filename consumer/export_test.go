package consumer

// SetCrash makes p stop at a step as a killed process would (tests only).
func SetCrash(p *Processor, f func(step, key string) bool) { p.crash = f }

// Steps where SetCrash can stop a processor.
var CrashSteps = []string{stepBeforeEffects, stepAfterEffects, stepAfterWatermark, stepBeforeAck, stepAfterRemember}

// Parks counts the events p asked Run to keep at their subject's head.
func Parks(p *Processor) int64 { return p.parks.Load() }

// RetryLinesPerSecond is how many "event will be retried" lines a provider logs a second.
const RetryLinesPerSecond = retryLinesPerSecond

// Transient reports an Outcome that Run tries again in place, holding
// the event's subject, without counting an attempt.
func Transient(o Outcome) bool { return o.transient }
