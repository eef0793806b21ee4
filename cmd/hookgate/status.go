package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

// runStatus prints the streams, buckets, consumer lag, DLQ depth and dedup
// store size: `hookgate status --config FILE [--json]`.
func runStatus(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	asJSON := fs.Bool("json", false, "print a JSON document")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("status: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath, getenv)
	if err != nil {
		return err
	}
	ctx, cancel := cliContext(ctx)
	defer cancel()
	sys, err := openForCLI(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), readOnly)
	if err != nil {
		if *asJSON {
			// Monitoring parses stdout in exactly these outages (NATS
			// down, credentials refused, data_dir held by a serve without
			// nats.embedded.listen): a document, with the error (review
			// AO: stdout was empty).
			via := viaURL
			if cfg.NATS.URL == "" {
				via = viaDataDir // what the CLI tries last
			}
			d := statusErrorDoc{Time: time.Now().UTC(), Via: via, Instances: []instanceDoc{}, InstancesNote: "not asked: NATS not reached",
				Problems: []string{"NATS not reached: " + err.Error()}, Error: err.Error()}
			if eerr := writeJSON(stdout, d); eerr != nil {
				return eerr
			}
		}
		return err
	}
	defer sys.Close()
	// The running serves first: they answer on core NATS, so they are
	// listed (with what their /readyz says) also when JetStream does not
	// answer, where they explain the most (review I).
	via := viaOf(cfg, sys)
	inst := askInstances(ctx, sys, via)
	// The dedup store is counted by the running gateways' horizon where
	// they say it: by this config's, status counted keys a gateway with a
	// shorter horizon accepts again (a dedup audit, stop 40).
	horizon, running := inst.gatewayHorizon()
	if !running || seconds(horizon) == seconds(cfg.Dedup.Horizon) {
		horizon = cfg.Dedup.Horizon // the same, to the second they say it in
	}
	st, err := jetstream.ReadStatus(ctx, sys.conn, jetstream.StatusOptions{Horizon: horizon})
	if err != nil {
		if !*asJSON {
			writeInstances(stdout, inst)
			return fmt.Errorf("status: %w", err)
		}
		// The instances explain the most exactly then (a serve not ready,
		// and why): monitoring gets them too, with the error (review V:
		// stdout was empty).
		d := statusErrorDoc{Time: time.Now().UTC(), Via: via, Instances: inst.Docs, InstancesNote: inst.None, Error: "status: " + err.Error()}
		if d.Instances == nil {
			d.Instances = []instanceDoc{}
		}
		// Never an empty list here: a check reading problems[] must see
		// the outage (review AQ).
		d.Problems = append(instanceProblems(inst), "streams not read: "+err.Error())
		if eerr := writeJSON(stdout, d); eerr != nil {
			return eerr
		}
		return fmt.Errorf("status: %w", err)
	}
	snap := keyIndexSnapshot(cfg)
	if *asJSON {
		d := newStatusDoc(st, via, snap)
		d.Instances, d.InstancesNote = inst.Docs, inst.None
		d.Problems = statusProblems(st, inst)
		if d.Instances == nil {
			d.Instances = []instanceDoc{}
		}
		return writeJSON(stdout, d)
	}
	writeStatus(stdout, st, via, cfg, snap, inst)
	return nil
}

// How the CLI reached JetStream, in the status output.
const (
	viaURL     = "nats.url"
	viaListen  = "nats.embedded.listen"
	viaDataDir = "data_dir"
)

func viaOf(cfg *config.Config, sys *system) string {
	switch {
	case cfg.NATS.URL != "":
		return viaURL
	case sys.embedded != nil:
		return viaDataDir
	}
	return viaListen
}

// statusDoc is `hookgate status --json`. It is a stable interface for
// scripts and monitoring: fields are added, never renamed or removed.
// Times are RFC 3339 in UTC and omitted when unknown (an empty stream),
// durations are whole seconds (0: no limit), sizes are bytes.
//
//	time                 when the status was read
//	via                  how JetStream was reached: "nats.url",
//	                     "nats.embedded.listen", or "data_dir" (no hookgate
//	                     was running; the CLI opened the data dir itself)
//	problems[]           what needs a person, a line each (statusProblems):
//	                     an instance not ready, no serve answering, a
//	                     stream, bucket or the consumer missing, dead
//	                     letters, WEBHOOKS/GRANTS/DLQ at 90% of max_bytes;
//	                     empty when none
//	instances[]          the running serves that answered (instanceDoc):
//	                     instance, version, roles, listen, started, ready,
//	                     problem, applying
//	instances_note       why none is listed, when none is
//	streams[]            WEBHOOKS, GRANTS, DLQ, AUDIT, in that order
//	  name, exists       exists is false for a stream not created yet
//	  messages, bytes
//	  first_seq, last_seq
//	  first_time, last_time
//	  max_age_seconds    0: no age limit
//	  max_bytes          -1: no size limit
//	  disk_use_percent   bytes as a percentage of max_bytes; absent without a limit
//	  duplicate_window_seconds
//	  replicas           the stream's replica count
//	  replicas_offline   replicas its leader reports offline, or not current and
//	                     silent for 10 s or more; absent when none
//	buckets[]            WATERMARKS, APPLIED
//	  name, exists
//	  values             entries (one per key)
//	  bytes
//	  ttl_seconds        0: entries never expire
//	consumers[]          hookgate-apply on WEBHOOKS first (exists false until
//	                     a consumer ran), then other durable consumers of
//	                     WEBHOOKS and GRANTS
//	  stream, name, exists
//	  num_pending        stored, not yet delivered
//	  num_ack_pending    delivered, not yet acknowledged
//	  num_redelivered    delivered more than once, not yet acknowledged
//	  num_waiting        pull requests waiting
//	  delivered_stream_seq, last_delivered
//	  ack_floor_stream_seq, last_ack, oldest_unapplied (when the
//	                     oldest event not yet applied was stored; WEBHOOKS
//	                     only, absent when none waits)
//	dlq_depth            letters in DLQ
//	dlq_by_provider      {provider: letters}
//	watermarks           subjects with a WATERMARKS entry (less the key-shard
//	                     leases): a subject has one from its first event's
//	                     lease on, applied or not (trace tells)
//	key_shard_leases     WATERMARKS entries leasing events without a subject
//	applied_keys         keys APPLIED remembers (they expire after the horizon);
//	                     a watermark rule publishing to a subject with
//	                     {subject} remembers by its GRANTS messages instead
//	dedup
//	  horizon_seconds    dedup.horizon: the running gateways' (the shortest)
//	                     where they answer, else this config's
//	  since              now - horizon
//	  first_seq          first WEBHOOKS sequence stored since then; 0: none
//	  store_size         WEBHOOKS messages stored since then: the keys
//	                     JetStream refuses as duplicates; absent when the
//	                     server cannot look messages up by time
//	  window_seconds     WEBHOOKS' duplicate window as the server has it
//	  key_index          who refuses the horizon's keys: "none" (the server's
//	                     window), "kept" (the embedded gateway's key index;
//	                     the window is dedup.window), "pending" (an upgrade
//	                     began; the window spans the horizon until an
//	                     embedded serve's index has read the keys back)
//	  key_index_snapshot the index's file in data_dir (embedded, when the
//	    path             CLI sees it): path, size in bytes, when written;
//	    bytes            absent without one
//	    written
//	consumer_lock        on a cluster, the instance that applies events
//	  owner              host/pid/id of the holder; "" when free
//	  until              when it expires unless renewed
//
// When JetStream does not answer, the document holds only time, via,
// instances, instances_note and error (statusErrorDoc), and the exit is 1.
type statusDoc struct {
	Time          time.Time         `json:"time"`
	Via           string            `json:"via"`
	Instances     []instanceDoc     `json:"instances"`
	InstancesNote string            `json:"instances_note,omitempty"`
	Problems      []string          `json:"problems"`
	Streams       []streamDoc       `json:"streams"`
	Buckets       []bucketDoc       `json:"buckets"`
	Consumers     []consumerDoc     `json:"consumers"`
	DLQDepth      uint64            `json:"dlq_depth"`
	DLQByProvider map[string]uint64 `json:"dlq_by_provider"`
	Watermarks    uint64            `json:"watermarks"`
	KeyShards     uint64            `json:"key_shard_leases"`
	AppliedKeys   uint64            `json:"applied_keys"`
	Dedup         dedupDoc          `json:"dedup"`
	ConsumerLock  *lockDoc          `json:"consumer_lock,omitempty"`
}

// statusErrorDoc is `hookgate status --json` when JetStream does not
// answer (exit 1): the running serves that answered, and the error. When
// NATS itself is not reached, instances is empty and instances_note says
// they were not asked.
type statusErrorDoc struct {
	Time          time.Time     `json:"time"`
	Via           string        `json:"via"`
	Instances     []instanceDoc `json:"instances"`
	InstancesNote string        `json:"instances_note,omitempty"`
	Problems      []string      `json:"problems"`
	Error         string        `json:"error"`
}

// lockDoc: which instance applies events on a cluster; owner empty when
// the lock is free.
type lockDoc struct {
	Owner string     `json:"owner"`
	Until *time.Time `json:"until,omitempty"`
}

type streamDoc struct {
	Name            string     `json:"name"`
	Exists          bool       `json:"exists"`
	Messages        uint64     `json:"messages"`
	Bytes           uint64     `json:"bytes"`
	FirstSeq        uint64     `json:"first_seq"`
	LastSeq         uint64     `json:"last_seq"`
	FirstTime       *time.Time `json:"first_time,omitempty"`
	LastTime        *time.Time `json:"last_time,omitempty"`
	MaxAgeSeconds   int64      `json:"max_age_seconds"`
	MaxBytes        int64      `json:"max_bytes"`
	DiskUsePercent  *float64   `json:"disk_use_percent,omitempty"`
	DuplicateWindow int64      `json:"duplicate_window_seconds"`
	Replicas        int        `json:"replicas"`
	ReplicasOffline []string   `json:"replicas_offline,omitempty"`
}

type bucketDoc struct {
	Name       string `json:"name"`
	Exists     bool   `json:"exists"`
	Values     uint64 `json:"values"`
	Bytes      uint64 `json:"bytes"`
	TTLSeconds int64  `json:"ttl_seconds"`
	// As a stream's (since stop 41).
	Replicas        int      `json:"replicas,omitempty"`
	ReplicasOffline []string `json:"replicas_offline,omitempty"`
}

type consumerDoc struct {
	Stream             string     `json:"stream"`
	Name               string     `json:"name"`
	Exists             bool       `json:"exists"`
	NumPending         uint64     `json:"num_pending"`
	NumAckPending      int        `json:"num_ack_pending"`
	NumRedelivered     int        `json:"num_redelivered"`
	NumWaiting         int        `json:"num_waiting"`
	DeliveredStreamSeq uint64     `json:"delivered_stream_seq"`
	LastDelivered      *time.Time `json:"last_delivered,omitempty"`
	AckFloorStreamSeq  uint64     `json:"ack_floor_stream_seq"`
	LastAck            *time.Time `json:"last_ack,omitempty"`
	OldestUnapplied    *time.Time `json:"oldest_unapplied,omitempty"`
}

type dedupDoc struct {
	HorizonSeconds int64     `json:"horizon_seconds"`
	Since          time.Time `json:"since"`
	FirstSeq       uint64    `json:"first_seq"`
	StoreSize      *uint64   `json:"store_size,omitempty"`
	WindowSeconds  int64     `json:"window_seconds"`
	KeyIndex       string    `json:"key_index"`
	// Snapshot: the key index's file in data_dir, when the CLI can see it.
	Snapshot *snapshotDoc `json:"key_index_snapshot,omitempty"`
}

type snapshotDoc struct {
	Path    string    `json:"path"`
	Bytes   int64     `json:"bytes"`
	Written time.Time `json:"written"`
	// Problem: what is wrong with it, when something is.
	Problem string `json:"problem,omitempty"`
}

// keyIndexSnapshot describes the key index's snapshot file in data_dir
// (embedded server only); nil when there is none to see from here.
func keyIndexSnapshot(cfg *config.Config) *snapshotDoc {
	if cfg.NATS.URL != "" {
		return nil
	}
	p := filepath.Join(cfg.NATS.Embedded.DataDir, keyIndexFile)
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return nil
	case !fi.Mode().IsRegular():
		return &snapshotDoc{Path: p, Problem: "not a file: the key index cannot save itself (remove it)"}
	}
	return &snapshotDoc{Path: p, Bytes: fi.Size(), Written: fi.ModTime().UTC()}
}

func newStatusDoc(st jetstream.Status, via string, snap *snapshotDoc) statusDoc {
	d := statusDoc{
		Time:          st.At,
		Via:           via,
		DLQDepth:      st.Stream(jetstream.StreamDLQ).Messages,
		DLQByProvider: st.DLQByProvider,
		Watermarks:    st.Bucket(jetstream.BucketMarks).Values - st.Bucket(jetstream.BucketMarks).KeyShards,
		KeyShards:     st.Bucket(jetstream.BucketMarks).KeyShards,
		AppliedKeys:   st.Bucket(jetstream.BucketApplied).Values,
		Dedup: dedupDoc{
			HorizonSeconds: seconds(st.Dedup.Horizon),
			Since:          st.Dedup.Since,
			FirstSeq:       st.Dedup.FirstSeq,
			WindowSeconds:  seconds(st.Dedup.Window),
			KeyIndex:       st.Dedup.KeyIndex,
			Snapshot:       snap,
		},
	}
	if l := st.ConsumerLock; l != nil {
		d.ConsumerLock = &lockDoc{Owner: l.Owner, Until: timePtr(l.Until)}
	}
	if d.DLQByProvider == nil {
		d.DLQByProvider = map[string]uint64{}
	}
	if st.Dedup.Known {
		n := st.Dedup.StoreSize
		d.Dedup.StoreSize = &n
	}
	for _, s := range st.Streams {
		sd := streamDoc{
			Name: s.Name, Exists: s.Exists, Messages: s.Messages, Bytes: s.Bytes,
			FirstSeq: s.FirstSeq, LastSeq: s.LastSeq,
			FirstTime: timePtr(s.FirstTime), LastTime: timePtr(s.LastTime),
			MaxAgeSeconds: seconds(s.MaxAge), MaxBytes: s.MaxBytes, DuplicateWindow: seconds(s.Duplicates),
			Replicas: s.Replicas, ReplicasOffline: s.ReplicasOffline,
		}
		if pct, ok := s.DiskUse(); ok && s.Exists {
			pct = math.Round(pct*100) / 100
			sd.DiskUsePercent = &pct
		}
		d.Streams = append(d.Streams, sd)
	}
	for _, b := range st.Buckets {
		d.Buckets = append(d.Buckets, bucketDoc{Name: b.Name, Exists: b.Exists, Values: b.Values, Bytes: b.Bytes, TTLSeconds: seconds(b.TTL),
			Replicas: b.Replicas, ReplicasOffline: b.ReplicasOffline})
	}
	for _, c := range st.Consumers {
		d.Consumers = append(d.Consumers, consumerDoc{
			Stream: c.Stream, Name: c.Name, Exists: c.Exists,
			NumPending: c.NumPending, NumAckPending: c.NumAckPending, NumRedelivered: c.NumRedelivered, NumWaiting: c.NumWaiting,
			DeliveredStreamSeq: c.Delivered.StreamSeq, LastDelivered: timePtr(c.Delivered.Last),
			AckFloorStreamSeq: c.AckFloor.StreamSeq, LastAck: timePtr(c.AckFloor.Last),
			OldestUnapplied: timePtr(c.OldestUnapplied),
		})
	}
	return d
}

// writeStatus prints the status as short aligned tables.
func writeStatus(w io.Writer, st jetstream.Status, via string, cfg *config.Config, snap *snapshotDoc, inst instancesView) {
	switch via {
	case viaDataDir:
		fmt.Fprintf(w, "hookgate status at %s, read from data_dir %s (no hookgate running)\n\n", stamp(st.At), cfg.NATS.Embedded.DataDir)
	case viaListen:
		fmt.Fprintf(w, "hookgate status at %s, read through nats.embedded.listen %s\n\n", stamp(st.At), cfg.NATS.Embedded.Listen)
	default:
		fmt.Fprintf(w, "hookgate status at %s, read through nats.url\n\n", stamp(st.At))
	}
	// What needs a person first, so a look at 3 a.m. starts there.
	if problems := statusProblems(st, inst); len(problems) == 0 {
		fmt.Fprint(w, "PROBLEMS   none\n\n")
	} else {
		fmt.Fprintln(w, "PROBLEMS")
		for _, p := range problems {
			fmt.Fprintf(w, "  - %s\n", printable(p))
		}
		fmt.Fprintln(w)
	}
	writeInstances(w, inst)
	tw := newTable(w)
	fmt.Fprintln(tw, "STREAM\tMESSAGES\tSIZE\tFIRST\tLAST\tMAX AGE\tMAX SIZE\tDISK USE\tDUP WINDOW")
	for _, s := range st.Streams {
		if !s.Exists {
			fmt.Fprintf(tw, "%s\tmissing\n", s.Name)
			continue
		}
		use := "-"
		if pct, ok := s.DiskUse(); ok {
			use = fmt.Sprintf("%.1f%%", pct)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Messages, humanBytes(s.Bytes), stamp(s.FirstTime), stamp(s.LastTime),
			shortDuration(s.MaxAge), limitBytes(s.MaxBytes), use, shortDuration(s.Duplicates))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)

	fmt.Fprintln(tw, "BUCKET\tENTRIES\tSIZE\tTTL")
	for _, b := range st.Buckets {
		what := "watermarks"
		if b.Name == jetstream.BucketApplied {
			what = "applied keys remembered (rules that do not remember by GRANTS)"
		}
		if !b.Exists {
			fmt.Fprintf(tw, "%s\tmissing\n", b.Name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", b.Name, b.Values, humanBytes(b.Bytes), shortDuration(b.TTL), what)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)

	fmt.Fprintln(tw, "CONSUMER\tPENDING\tACK PENDING\tREDELIVERED\tDELIVERED\tACK FLOOR\tLAST ACTIVE")
	for _, c := range st.Consumers {
		if !c.Exists {
			fmt.Fprintf(tw, "%s/%s\tmissing\n", c.Stream, c.Name)
			continue
		}
		fmt.Fprintf(tw, "%s/%s\t%d\t%d\t%d\tseq %d\tseq %d\t%s\n", c.Stream, c.Name, c.NumPending, c.NumAckPending, c.NumRedelivered,
			c.Delivered.StreamSeq, c.AckFloor.StreamSeq, stamp(c.Delivered.Last))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)

	dlq := fmt.Sprint(st.Stream(jetstream.StreamDLQ).Messages)
	if len(st.DLQByProvider) > 0 {
		var parts []string
		for _, p := range sortedKeys(st.DLQByProvider) {
			parts = append(parts, fmt.Sprintf("%s %d", p, st.DLQByProvider[p]))
		}
		dlq += " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintf(tw, "DLQ depth\t%s\n", dlq)
	d := st.Dedup
	size := "unknown (the server cannot find messages by time; needs nats-server 2.11+)"
	if d.Known {
		noun := "keys"
		if d.StoreSize == 1 {
			noun = "key"
		}
		size = fmt.Sprintf("%d %s stored in the last %s", d.StoreSize, noun, shortDuration(d.Horizon))
		if d.StoreSize > 0 {
			size += fmt.Sprintf(" (WEBHOOKS seq %d-%d)", d.FirstSeq, d.FirstSeq+d.StoreSize-1)
		}
		if d.Horizon != cfg.Dedup.Horizon {
			size += fmt.Sprintf(" (the running gateway's dedup.horizon; this config says %s)", shortDuration(cfg.Dedup.Horizon))
		}
	}
	switch d.KeyIndex {
	case jetstream.KeyIndexKeeps:
		fmt.Fprintf(tw, "dedup store size\t%s; kept by the embedded gateway's key index (JetStream's own window %s)\n", size, shortDuration(d.Window))
	case jetstream.KeyIndexPending:
		fmt.Fprintf(tw, "dedup store size\t%s; server duplicate window %s, until the key index an upgrade began has read them (an embedded serve finishes it)\n", size, shortDuration(d.Window))
	default:
		fmt.Fprintf(tw, "dedup store size\t%s; server duplicate window %s\n", size, shortDuration(d.Window))
	}
	if snap != nil && snap.Problem != "" {
		fmt.Fprintf(tw, "key index snapshot\t%s: %s\n", snap.Path, snap.Problem)
	} else if snap != nil {
		ago := max(st.At.Sub(snap.Written), 0).Round(time.Second)
		fmt.Fprintf(tw, "key index snapshot\t%s, %s, written %s (%s ago)\n", snap.Path, humanBytes(uint64(snap.Bytes)), stamp(snap.Written), ago)
	}
	marks := st.Bucket(jetstream.BucketMarks)
	if marks.KeyShards > 0 {
		fmt.Fprintf(tw, "watermarks\t%s (and %s of events without a subject)\n", counted(marks.Values-marks.KeyShards, "subject", "subjects"), counted(marks.KeyShards, "lease", "leases"))
	} else {
		fmt.Fprintf(tw, "watermarks\t%d\n", marks.Values)
	}
	if l := st.ConsumerLock; l != nil {
		switch {
		case l.Owner == "":
			fmt.Fprintf(tw, "consumer lock\tfree (no instance applies events)\n")
		case st.At.After(l.Until):
			fmt.Fprintf(tw, "consumer lock\t%s, expired %s ago (a standby takes it one ack wait, the longest forward.timeout + 30s, after it expired)\n", printable(l.Owner), st.At.Sub(l.Until).Round(time.Second))
		case inst.None == "" && !lockHolderAnswered(l.Owner, inst):
			// Review BI: after a kill -9 of the holder this said "this
			// instance applies events" of a process no longer listed.
			fmt.Fprintf(tw, "consumer lock\theld by %s, which did not answer (stopped, or cut off from NATS?): it expires at %s, and a standby takes it one ack wait (the longest forward.timeout + 30s) later\n", printable(l.Owner), l.Until.Format(time.RFC3339))
		default:
			fmt.Fprintf(tw, "consumer lock\theld by %s (this instance applies events), renewed until %s\n", printable(l.Owner), l.Until.Format(time.RFC3339))
		}
	}
	_ = tw.Flush()
}

func seconds(d time.Duration) int64 { return int64(d / time.Second) }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// stamp is a time for people: UTC, to the second; "-" for none.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// shortDuration writes 720h as 30d and 96h as 4d; 0 is "-" (no limit).
func shortDuration(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d <= 0:
		return "-"
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.Round(time.Second).String()
}

// humanBytes writes a size with one decimal in SI units, as the config's
// examples (10GB) are.
func humanBytes(n uint64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		v /= 1000
		if v < 999.95 || u == "TB" {
			return strings.Replace(fmt.Sprintf("%.1f %s", v, u), ".0 ", " ", 1)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// limitBytes writes a configured limit exactly, in the largest binary
// (1 GiB) or SI (10 GB) unit that divides it; -1 is "-" (no limit).
func limitBytes(n int64) string {
	if n <= 0 {
		return "-"
	}
	best, name := int64(1), "B"
	for _, u := range []struct {
		name string
		m    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if n%u.m == 0 && u.m > best {
			best, name = u.m, u.name
		}
	}
	return fmt.Sprintf("%d %s", n/best, name)
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// writeJSON writes v as an indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// lockHolderAnswered reports whether the consumer lock's owner
// (serve@host/pid/id) is one of the serves that answered status.
func lockHolderAnswered(owner string, inst instancesView) bool {
	o := strings.TrimPrefix(owner, servePrefix)
	for _, d := range inst.Docs {
		if strings.HasPrefix(o, d.Instance+"/") {
			return true
		}
	}
	return false
}

// counted is "1 subject", "2 subjects": n with the noun's form for it.
func counted[N int | int64 | uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
