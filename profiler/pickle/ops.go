// Package pickle reads Python pickles as plain data, safely: it understands every
// opcode that dicts, lists, tuples, sets, strings, bytes, numbers, booleans and
// None use in protocols 0–5, and refuses every opcode that would import a module
// or call a function. Nothing named in a pickle is ever looked up or run.
//
// Decoding is two passes over the input. Scan counts how often each memo slot is
// read back; the Machine then keeps a memoised object only until its last read,
// so a 5-million-event snapshot never holds its whole object graph. A caller can
// also take over list appends (Machine.OnAppend) to consume items as they arrive.
package pickle

import "fmt"

// Opcodes, named as in CPython's pickletools.
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opFloat          = 'F'
	opInt            = 'I'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opLong           = 'L'
	opBinInt2        = 'M'
	opNone           = 'N'
	opPersID         = 'P'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opString         = 'S'
	opBinString      = 'T'
	opShortBinString = 'U'
	opUnicode        = 'V'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opGet            = 'g'
	opBinGet         = 'h'
	opInst           = 'i'
	opLongBinGet     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opObj            = 'o'
	opPut            = 'p'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinFloat       = 'G'

	opProto    = 0x80
	opNewObj   = 0x81
	opExt1     = 0x82
	opExt2     = 0x83
	opExt4     = 0x84
	opTuple1   = 0x85
	opTuple2   = 0x86
	opTuple3   = 0x87
	opNewTrue  = 0x88
	opNewFalse = 0x89
	opLong1    = 0x8a
	opLong4    = 0x8b

	opBinBytes      = 'B'
	opShortBinBytes = 'C'

	opShortBinUnicode = 0x8c
	opBinUnicode8     = 0x8d
	opBinBytes8       = 0x8e
	opEmptySet        = 0x8f
	opAddItems        = 0x90
	opFrozenSet       = 0x91
	opNewObjEx        = 0x92
	opStackGlobal     = 0x93
	opMemoize         = 0x94
	opFrame           = 0x95

	opByteArray8     = 0x96
	opNextBuffer     = 0x97
	opReadonlyBuffer = 0x98
)

// refused names the opcodes that import, call or reach outside the data; a
// pickle holding any of them is rejected before anything is built.
var refused = map[byte]string{
	opGlobal:         "GLOBAL",
	opStackGlobal:    "STACK_GLOBAL",
	opReduce:         "REDUCE",
	opBuild:          "BUILD",
	opInst:           "INST",
	opObj:            "OBJ",
	opNewObj:         "NEWOBJ",
	opNewObjEx:       "NEWOBJ_EX",
	opExt1:           "EXT1",
	opExt2:           "EXT2",
	opExt4:           "EXT4",
	opPersID:         "PERSID",
	opBinPersID:      "BINPERSID",
	opNextBuffer:     "NEXT_BUFFER",
	opReadonlyBuffer: "READONLY_BUFFER",
}

// Error is a decoding failure at a byte offset of the input.
type Error struct {
	Offset int64
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("at byte %d: %s", e.Offset, e.Msg) }

// Limits bound what a pickle may make the decoder hold.
type Limits struct {
	MaxStack     int   // values on the stack at once
	MaxMarks     int   // nesting of MARKs
	MaxString    int64 // bytes in one string or bytes object
	MaxHeld      int64 // values held in containers the caller did not consume
	MaxMemoIndex int64 // largest explicit memo index accepted
}

// DefaultLimits fit any real snapshot while keeping a hostile file's footprint small.
var DefaultLimits = Limits{
	MaxStack:     1 << 20,
	MaxMarks:     1 << 12,
	MaxString:    1 << 30,
	MaxHeld:      8 << 20,
	MaxMemoIndex: 1 << 32,
}
