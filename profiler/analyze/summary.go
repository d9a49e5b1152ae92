package analyze

import "encoding/json"

// MaxSummarySites bounds the sites (and leaf sites) the JSON of a Result
// carries, the most memory at the peak first, with a count of the rest: a
// crafted snapshot of 300,000 lines of their own made a 111 MB summary, all
// but 118 kB of it its two site lists. The Result keeps every site for what
// asks by file (the language server's hints, the daemon's analysis.sites).
const MaxSummarySites = 1000

// MarshalJSON writes the result with its site lists bounded.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // the same fields, without this method
	r.Sites, r.SitesMore = bounded(r.Sites)
	r.LeafSites, r.LeafSitesMore = bounded(r.LeafSites)
	return json.Marshal(plain(r))
}

func bounded(sites []Site) ([]Site, int) {
	if len(sites) <= MaxSummarySites {
		return sites, 0
	}
	return sites[:MaxSummarySites], len(sites) - MaxSummarySites
}
