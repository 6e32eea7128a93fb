// Reads a ringrep primary's change stream with ZongJi (@vlasky/zongji), as a CDC tool does.
//
//     node cdc.js PORT FILE POS [MAX_COMMITS]
//
// The same output as cdc.py (one JSON line per change, DDL and commit, values in column order,
// buffers as hex, dates as ISO text); stops once nothing came for a second and a half, or after
// MAX_COMMITS commits. Exits 2 when ZongJi is not installed.
let ZongJi;
try {
  ZongJi = require('@vlasky/zongji');
} catch (e) {
  console.log(`skipped: ZongJi is not installed: ${e.message}`);
  process.exit(2);
}

const [port, file, pos, max] = process.argv.slice(2);
const maxCommits = max === undefined ? Infinity : Number(max);
const zongji = new ZongJi({ host: '127.0.0.1', port: Number(port), user: 'root', password: '' });

const plain = (v) => {
  if (Buffer.isBuffer(v)) return v.toString('hex');
  if (v instanceof Date) return v.toISOString();
  return v;
};
// A BIT (a Buffer of its bytes, big endian) as its number; anything else as plain() gives it.
const BIT = 16;
const values = (row, t) => Object.values(row).map((v, i) => (
  Buffer.isBuffer(v) && t.columns[i] && t.columns[i].type === BIT
    ? BigInt('0x' + (v.toString('hex') || '0')).toString()
    : plain(v)));
const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');

let current = file;
let commits = 0;
let stopping = false;
let timer;
const stop = () => {
  if (stopping) return;
  stopping = true;
  clearTimeout(timer);
  zongji.stop();
};
const idle = () => {
  clearTimeout(timer);
  timer = setTimeout(stop, 1500);
};

zongji.on('binlog', (ev) => {
  if (stopping) return;
  idle();
  const name = ev.getEventName();
  if (name === 'rotate') {
    current = ev.binlogName;
  } else if (name === 'query') {
    if (ev.query !== 'BEGIN') print({ query: ev.query });
  } else if (name === 'writerows' || name === 'deleterows') {
    const t = ev.tableMap[ev.tableId];
    for (const r of ev.rows) {
      print({ op: name === 'writerows' ? 'write' : 'delete', table: `${t.parentSchema}.${t.tableName}`, values: values(r, t) });
    }
  } else if (name === 'updaterows') {
    const t = ev.tableMap[ev.tableId];
    for (const r of ev.rows) {
      print({ op: 'update', table: `${t.parentSchema}.${t.tableName}`, before: values(r.before, t), after: values(r.after, t) });
    }
  } else if (name === 'xid') {
    print({ commit: Number(ev.xid), file: current, pos: ev.nextPosition });
    commits += 1;
    if (commits >= maxCommits) stop();
  }
});
zongji.on('error', (e) => {
  console.error(`ZongJi error: ${e.message}`);
  process.exit(1);
});
zongji.on('stopped', () => process.exit(0));
zongji.start({
  serverId: 4343,
  filename: file,
  position: Number(pos),
  includeEvents: ['rotate', 'query', 'tablemap', 'writerows', 'updaterows', 'deleterows', 'xid'],
});
idle();
