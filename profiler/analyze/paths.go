package analyze

// mapPaths rewrites recorded file names to local ones in everything the
// result reports. Attribution was decided on the recorded names, so library
// code stays library code wherever it is mapped to.
func (r *Result) mapPaths() {
	if r.paths == nil {
		return
	}
	m := r.paths.Map
	for _, list := range [][]Site{r.Sites, r.LeafSites} {
		for i := range list {
			list[i].File = m(list[i].File)
		}
	}
	for i := range r.Stacks {
		for j := range r.Stacks[i].Frames {
			r.Stacks[i].Frames[j].File = m(r.Stacks[i].Frames[j].File)
		}
	}
	for i := range r.OOMs {
		r.OOMs[i].File = m(r.OOMs[i].File)
		for j := range r.OOMs[i].Frames {
			r.OOMs[i].Frames[j].File = m(r.OOMs[i].Frames[j].File)
		}
	}
	for i := range r.Findings {
		r.Findings[i].File = m(r.Findings[i].File)
		for j := range r.Findings[i].Evidence.Lines {
			r.Findings[i].Evidence.Lines[j].File = m(r.Findings[i].Evidence.Lines[j].File)
		}
	}
}
