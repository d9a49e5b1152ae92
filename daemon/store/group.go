package store

// Groups: the snapshots of every rank of one job, captured together. Each
// member's meta names its group (Meta.Group) before the member is committed,
// and the group record (groups/<id>.json) is written, like a meta file,
// through a temporary file and a rename once every member is in. A crash
// between the two leaves members that name a group without a record: Group
// assembles that group from the members' metas, so nothing committed is lost.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Group is one capture of every rank of a job.
type Group struct {
	ID      string    `json:"id"` // "job-" and a snapshot-like ID: sortable by time
	Created time.Time `json:"created"`
	Reason  string    `json:"reason"` // "request", or "oom" (an OOM on one rank captured the others)
	// Job is what the ranks share: "run:<TORCHELASTIC_RUN_ID>",
	// "master:<addr>:<port>" or "parent:<pid>".
	Job     string   `json:"job"`
	Label   string   `json:"label,omitempty"`
	Members []Member `json:"members"` // by rank
	// SkewMS is the spread of the members' capture times (the latest minus the
	// earliest), in milliseconds: how far apart in time the ranks were seen.
	SkewMS float64 `json:"skew_ms"`
	// Failed lists the ranks asked that gave no snapshot, and why.
	Failed []Failure `json:"failed,omitempty"`
	// Partial: no record was written (the daemon stopped before it could);
	// the group was assembled from its members' metas.
	Partial bool `json:"partial,omitempty"`
}

// Member is one rank's snapshot in a group.
type Member struct {
	Rank int    `json:"rank"`
	PID  int    `json:"pid"`
	ID   string `json:"snapshot"`
	// CapturedMS is when the rank's allocator state was read (unix
	// milliseconds, the daemon's clock): the agent's _snapshot() call.
	CapturedMS float64 `json:"captured_ms"`
}

// Failure is a rank that gave no snapshot.
type Failure struct {
	Rank  int    `json:"rank"`
	PID   int    `json:"pid"`
	Error string `json:"error"`
}

var groupRE = regexp.MustCompile(`^job-[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9]{4}$`)

// ValidGroupID reports whether id has the form of a group ID.
func ValidGroupID(id string) bool { return groupRE.MatchString(id) }

// NewGroupID returns a fresh group ID (from the same counter as snapshot IDs,
// so it sorts among them by time).
func (s *Store) NewGroupID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "job-" + s.nextID(time.Now())
}

const groupsName = "groups"

func (s *Store) groupsDir() string { return filepath.Join(s.dir, groupsName) }

// WriteGroup commits g's record: temporary file, fsync, rename, directory fsync.
func (s *Store) WriteGroup(g Group) error {
	if !ValidGroupID(g.ID) {
		return fmt.Errorf("store: %q is not a group ID", g.ID)
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	dir := s.groupsDir()
	if err := s.subdir(groupsName); err != nil {
		return err
	}
	data, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return wrap("encoding group", g.ID, err)
	}
	final := filepath.Join(dir, g.ID+metaExt)
	if err := s.writeFileAtomic(dir, final, "writing group", append(data, '\n')); err != nil {
		return err
	}
	return s.syncDir(dir)
}

// Group returns group id: its record, without the members the store has
// since removed (retention, delete), or, without a record, the group
// assembled from the metas that name it.
func (s *Store) Group(id string) (Group, bool) {
	if !ValidGroupID(id) {
		return Group{}, false
	}
	g, err := s.readGroup(filepath.Join(s.groupsDir(), id+metaExt))
	if err != nil {
		return s.assemble(id)
	}
	kept := g.Members[:0]
	for _, m := range g.Members {
		if _, ok := s.Get(m.ID); ok {
			kept = append(kept, m)
		}
	}
	g.Members = kept
	return g, len(g.Members) > 0
}

// Groups lists every group whose members are still stored, newest first.
func (s *Store) Groups() []Group {
	ids := map[string]bool{}
	if ents, err := s.readDir(s.groupsDir()); err == nil {
		for _, e := range ents {
			if id, ok := strings.CutSuffix(e.Name(), metaExt); ok && ValidGroupID(id) {
				ids[id] = true
			}
		}
	}
	for _, m := range s.List() {
		if m.Group != "" {
			ids[m.Group] = true
		}
	}
	var out []Group
	for id := range ids {
		if g, ok := s.Group(id); ok {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b Group) int { return strings.Compare(b.ID, a.ID) })
	return out
}

func (s *Store) readGroup(path string) (Group, error) {
	b, err := s.readFile(path)
	if err != nil {
		return Group{}, err
	}
	var g Group
	if err := json.Unmarshal(b, &g); err != nil {
		return Group{}, fmt.Errorf("store: group %s: %w", path, err)
	}
	return g, nil
}

// assemble builds a group nobody wrote a record for from its members' metas.
func (s *Store) assemble(id string) (Group, bool) {
	g := Group{ID: id, Partial: true}
	for _, m := range s.List() {
		if m.Group != id {
			continue
		}
		g.Members = append(g.Members, Member{Rank: m.Rank, PID: m.PID, ID: m.ID})
		g.Reason, g.Created = m.Reason, m.Created
	}
	slices.SortFunc(g.Members, func(a, b Member) int { return a.Rank - b.Rank })
	return g, len(g.Members) > 0
}
