#!/bin/bash
# handler.sh PYTHON [OPNUM]: the machine code of one instruction's handler in PYTHON's eval loop, found
# through the computed-goto table opcode_targets (the binary's relocations name each handler's address).  A handler that loads and stores next_instr through a stack slot (-0x138(%rbp) and the
# like) is the spill.  OPNUM: the instruction's number, 85 (LOAD_FAST in 3.13) by default
# (python3.13 -c "import opcode; print(opcode.opmap['LOAD_FAST'])").
set -eu
bin=$1; op=${2:-85}
base=$(nm "$bin" | awk '/ opcode_targets\.0$/{print $1}')
slot=$(printf "%x" $((0x$base + 8 * op)))
target=$(readelf -rW "$bin" | awk -v a="$slot" '{x = $1; sub(/^0+/, "", x); if (x == a) print $NF}')
[ -n "$target" ] || { echo "handler.sh: no relocation for opcode_targets[$op] in $bin" >&2; exit 2; }
objdump -d --no-show-raw-insn --start-address=0x"$target" \
    --stop-address="$(printf "0x%x" $((0x$target + 80)))" "$bin" | sed -n '7,30p'
