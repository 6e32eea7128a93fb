// The scenario of scenario.py through Node's mysql2 against a ringrep node:
//   node scenario.js HOST PORT
// connect, create a ring table of three rows per prefix, insert four rows (the fourth
// overwrites the first) with prepared statements (`execute`), read them back, errors with
// their codes (1031 for an INSERT naming the slot column, 1146 for a missing table), and
// introspection through information_schema. Exits 0 with "ok: ..." when every check holds,
// 1 naming the first that does not, 2 when mysql2 is not installed.
'use strict';

let mysql;
try {
  mysql = require('mysql2/promise');
} catch (e) {
  console.log(`skipped: mysql2 is not installed (run npm ci in integration/clients): ${e.message}`);
  process.exit(2);
}

const TABLE = 'clients_ring_node';

function check(cond, what) {
  if (!cond) {
    console.log(`FAILED: ${what}`);
    process.exit(1);
  }
}

async function expectError(conn, sql, code, what) {
  try {
    await conn.query(sql);
  } catch (e) {
    check(e.errno === code, `${what}: errno ${e.errno} (${e.message})`);
    return;
  }
  check(false, `${what}: accepted`);
}

async function main() {
  const [host, port] = [process.argv[2], Number(process.argv[3])];
  const conn = await mysql.createConnection({ host, port, user: 'root', database: 'test' });
  await conn.query(`DROP TABLE IF EXISTS ${TABLE}`);
  await conn.query(
    `CREATE TABLE ${TABLE} (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ` +
      'ring_meta VARBINARY(64), payload VARCHAR(64), amount DECIMAL(8,2), ' +
      'PRIMARY KEY (user_id, ring_idx), KEY by_payload (payload)) ' +
      "COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'",
  );
  for (const [i, p] of ['a', 'b', 'c', 'd'].entries()) {
    await conn.execute(`INSERT INTO ${TABLE} (user_id, payload, amount) VALUES (?, ?, ?)`, [
      1,
      p,
      `${i}.50`,
    ]);
  }
  const [rows] = await conn.execute(
    `SELECT payload, amount FROM ${TABLE} WHERE user_id = ? ORDER BY payload`,
    [1],
  );
  const got = rows.map((r) => `${r.payload}=${r.amount}`).join(',');
  check(got === 'b=1.50,c=2.50,d=3.50', `ring rows read back: ${got}`);
  await expectError(
    conn,
    `INSERT INTO ${TABLE} (user_id, ring_idx, payload) VALUES (1, 2, 'x')`,
    1031,
    'slot column INSERT',
  );
  await expectError(conn, 'SELECT * FROM no_such_table', 1146, 'missing table');
  const [cols] = await conn.query(
    'SELECT COLUMN_NAME AS name, DATA_TYPE AS type, COLUMN_KEY AS k FROM information_schema.COLUMNS ' +
      `WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '${TABLE}' ORDER BY ORDINAL_POSITION`,
  );
  const shape = cols.map((c) => `${c.name}:${c.type}:${c.k}`).join(',');
  check(
    shape ===
      'user_id:int:PRI,ring_idx:int:PRI,ring_meta:varbinary:,payload:varchar:MUL,amount:decimal:',
    `information_schema.COLUMNS: ${shape}`,
  );
  const [tables] = await conn.query('SHOW FULL TABLES');
  check(
    tables.some((t) => t.Tables_in_test === TABLE && t.Table_type === 'BASE TABLE'),
    `SHOW FULL TABLES: ${JSON.stringify(tables)}`,
  );
  // mysql2 sets CLIENT_FOUND_ROWS: affectedRows counts the rows an UPDATE matched, and
  // changedRows comes from the OK packet's info line.
  await conn.query('DROP TABLE IF EXISTS clients_counts_node');
  await conn.query('CREATE TABLE clients_counts_node (id INT PRIMARY KEY, v INT)');
  await conn.query('INSERT INTO clients_counts_node VALUES (1, 0), (2, 0), (3, 5)');
  const [upd] = await conn.query('UPDATE clients_counts_node SET v = 5');
  check(
    upd.affectedRows === 3 && upd.changedRows === 2 && upd.info.startsWith('Rows matched: 3'),
    `UPDATE matching 3 rows, changing 2: ${JSON.stringify(upd)}`,
  );
  await conn.query('DROP TABLE clients_counts_node');
  await conn.query(`DROP TABLE ${TABLE}`);
  await conn.end();
  console.log(`ok: mysql2 ${require('mysql2/package.json').version}`);
}

main().catch((e) => {
  console.log(`FAILED: ${e.stack || e}`);
  process.exit(1);
});
