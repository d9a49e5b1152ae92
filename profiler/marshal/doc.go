// Package marshal reads CPython marshal data holding plain values, and VSM1,
// the chunked container in which the agent sends a snapshot out of the
// training process: marshal.dumps is three times faster than pickle.dumps, and
// chunks let the daemon decode a snapshot while it is still being written.
//
// # Marshal
//
// Decoder reads the marshal format of CPython 3.8–3.14 (versions 0–4) into
// profiler/pickle's Values, so the snapshot code reads both formats alike:
// None, bools, ints of any size ('i', 'l' in 15-bit digits, 'I'), floats ('g',
// and 'f' in text), bytes, every str code, tuples, lists, dicts, sets and
// frozensets, and references ('r' and FLAG_REF). An object a payload refers to
// again stays one object: the same *pickle.Dict, *pickle.List or string.
//
// Anything else is refused, never interpreted: code objects, StopIteration,
// Ellipsis, complex numbers, slices, unknown codes. So are references that
// would make a cycle (to an object still being read; CPython refuses them for
// tuples and frozensets, and no snapshot has one), references past the table,
// unhashable dict keys or set items, a '0' anywhere but where a dict's next key
// would be, and bytes after the value. Every length is checked against the
// bytes left before anything is allocated, nesting is bounded by
// Limits.MaxDepth counting what references expand to (so a consumer that
// walks a value recurses at most that deep), and every error is an *Error
// with the byte offset in the stream.
//
// # VSM1
//
// A VSM1 stream is the magic "VSM1" followed by frames, each a kind byte, a
// payload length (uint64, little-endian) and the payload:
//
//	'H'  marshal.dumps(dict, 4): the snapshot dict without "device_traces"
//	'D'  empty: starts the next device's trace list (device 0, 1, ... in order)
//	'C'  marshal.dumps(list, 4): trace-entry dicts appended to the current device's list
//	'Z'  empty: the end of the stream; a stream without it is truncated
//
// Each payload is an independent marshal (references restart at 0 in every
// frame). The stream represents {**H, "device_traces": [the C chunks of each
// D, concatenated]}; with no D frame, "device_traces" is []. The H frame comes
// first and once; a C frame before any D is an error. jupyter/vramscope/agent/_vsm.py
// writes it.
//
// Reader hands out the frames of a stream one by one, decoded, holding one
// frame at a time; NextPayload hands them out undecoded, so that a reader can
// decode several chunks at once on other goroutines, each with a Decoder of
// its own. Decoder.DecodeEntries reads a chunk's entries straight from the
// bytes and hands each out as its keys and values, without building the list
// or its dicts: references, ints and short strings are read inline, and the
// storage is reused entry after entry and chunk after chunk. Transcode turns
// a stream into the protocol-4 pickle of the snapshot it represents, the file
// torch.cuda.memory._dump_snapshot() would have written.
package marshal
