package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGroupRecord: a group record survives a restart, loses the members the
// store removed, and a group whose record was never written (the daemon
// stopped between the members' commits and the record) is assembled from
// the members' metas.
func TestGroupRecord(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Limits{})
	gid := s.NewGroupID()
	if !ValidGroupID(gid) || ValidGroupID("../x") {
		t.Fatalf("group ID %q", gid)
	}
	a := commit(t, s, []byte("rank0"), Meta{Reason: "request", Rank: 0, PID: 10, Group: gid})
	b := commit(t, s, []byte("rank1"), Meta{Reason: "request", Rank: 1, PID: 11, Group: gid})
	g := Group{ID: gid, Reason: "request", Job: "run:abc", SkewMS: 3.5,
		Members: []Member{{Rank: 0, PID: 10, ID: a.ID, CapturedMS: 1}, {Rank: 1, PID: 11, ID: b.ID, CapturedMS: 4.5}}}
	if err := s.WriteGroup(g); err != nil {
		t.Fatal(err)
	}
	orphan := s.NewGroupID()
	c := commit(t, s, []byte("rank1 of a group without record"), Meta{Reason: "oom", Rank: 1, PID: 21, Group: orphan})
	os.WriteFile(filepath.Join(dir, "groups", tmpPrefix+"x"), []byte("{"), 0o600)
	s.Close()

	s = open(t, dir, Limits{})
	if _, err := os.Stat(filepath.Join(dir, "groups", tmpPrefix+"x")); err == nil {
		t.Error("the temporary file of an interrupted group write is still there")
	}
	got, ok := s.Group(gid)
	if !ok || got.Job != "run:abc" || got.SkewMS != 3.5 || len(got.Members) != 2 || got.Partial {
		t.Fatalf("group after restart: %+v", got)
	}
	part, ok := s.Group(orphan)
	if !ok || !part.Partial || len(part.Members) != 1 || part.Members[0].ID != c.ID || part.Reason != "oom" {
		t.Errorf("group without record: %+v", part)
	}
	if all := s.Groups(); len(all) != 2 || all[0].ID != orphan {
		t.Errorf("groups: %+v", all)
	}
	if err := s.Delete(a.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Group(gid); len(got.Members) != 1 || got.Members[0].Rank != 1 {
		t.Errorf("group after deleting rank 0: %+v", got)
	}
	if err := s.WriteGroup(Group{ID: "../../etc/x"}); err == nil {
		t.Error("a group with a bad ID was written")
	}
}
