/**
 * The streamed import's verifier (src/services/tenant-moves.ts `verifySource`) and line splitter
 * (src/services/import-uploads.ts `splitLines`): the references between rows are checked with
 * at most `reference_capacity` digests held at once, reading the file again per partition, and
 * the outcome (accepted, or the first problem and its line) is the one of holding them all; a
 * byte stream cut anywhere gives the lines `text.split('\n')` gives.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize, sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import { TENANT_TABLES, tenantTableColumns } from '../../../src/db/tenant-rows.js';
import { splitLines, splitLinesFrom } from '../../../src/services/import-uploads.js';
import {
  type ExportSource,
  type SavedVerification,
  Verification,
  textSource,
  verifySource,
} from '../../../src/services/tenant-moves.js';

const port = { columnsOf: tenantTableColumns };
const T = 'ten-verifier';
const hex = (i: number, salt = 'd') => sha256HexOfText(`${salt}${i}`);

/** A row of `table` with every column (text `x`, integers 0), given values over them. */
function row(table: string, values: Record<string, string | number | null>): string {
  const columns = tenantTableColumns(table);
  if (columns === null) throw new Error(`no table ${table}`);
  const r: Record<string, string | number | null> = {};
  for (const c of columns)
    r[c.name] = Object.hasOwn(values, c.name)
      ? (values[c.name] as string | number | null)
      : c.type === 'text'
        ? 'x'
        : 0;
  return canonicalize({ row: { ...r, tenant_id: T }, table });
}

/**
 * A synthetic export: an archive of `entries` archived receipts and a signature for each digest in
 * `signed` (a digest of an entry, or one the file does not hold).
 */
function file(entries: number, signed: readonly string[], archive = hex(0, 'archive')): string {
  const lines = [
    row('tenant_quotas', {}),
    row('tenants', { name: 'verifier', policy_sha256: hex(0, 'policy'), created_at_unix_ms: 1 }),
  ];
  signed.forEach((sha, i) => {
    const envelope = canonicalize({ issued_at_unix_ms: 5, receipt_sha256: sha, tenant_id: T });
    lines.push(
      row('receipt_signatures', { seq: i + 1, receipt_sha256: sha, envelope, created_at_unix_ms: 5 }),
    );
  });
  lines.push(row('receipt_archives', { archive_sha256: hex(0, 'archive') }));
  for (let i = 0; i < entries; i++)
    lines.push(row('receipt_archive_entries', { sha256: hex(i), archive_sha256: archive }));
  return `${lines.join('\n')}\n`;
}

/** `source` read as a stream: every read counted. */
function counted(source: ExportSource) {
  const seen = { reads: 0 };
  return {
    seen,
    source: {
      sha256: source.sha256,
      lines: () => {
        seen.reads += 1;
        return source.lines();
      },
    } satisfies ExportSource,
  };
}

const outcome = async (text: string, capacity?: number) => {
  try {
    const v = await verifySource(port, textSource(text), { reference_capacity: capacity });
    return { ok: true, rows: v.rows_total };
  } catch (e) {
    return { ok: false, message: (e as Error).message };
  }
};

describe('the reference check in bounded memory', () => {
  it('holds at most its capacity however many digests the file has, reading it again per partition', async () => {
    for (const entries of [50, 400]) {
      const text = file(entries, [hex(3), hex(entries - 1)]);
      const { source, seen } = counted(textSource(text));
      const v = await verifySource(port, source, { reference_capacity: 16 });
      expect(v.verification.peak_references).toBeLessThanOrEqual(16);
      expect(v.verification.reads).toBe(seen.reads);
      // About 2 * digests / capacity partitions, each one read.
      expect(seen.reads).toBeGreaterThanOrEqual(1 + Math.ceil(entries / 16));
      expect(v.rows_total).toBe(entries + 5);
    }
    // With room for every digest, one read.
    const { source, seen } = counted(textSource(file(50, [hex(3)])));
    expect((await verifySource(port, source)).verification.reads).toBe(1);
    expect(seen.reads).toBe(1);
  });

  it('names the same first problem as holding every digest (a missing receipt, a missing archive)', async () => {
    const deep = file(200, [hex(5), hex(0, 'nowhere'), hex(9)]);
    const all = await outcome(deep);
    expect(all).toMatchObject({ ok: false, message: expect.stringMatching(/line 4: signature of receipt/) });
    expect(await outcome(deep, 4)).toEqual(all);
    const noArchive = file(100, [], hex(1, 'other-archive'));
    expect(await outcome(noArchive)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/line 4: archive entry/),
    });
    expect(await outcome(noArchive, 3)).toEqual(await outcome(noArchive));
  });

  it('property: any capacity gives the outcome of unbounded memory', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 60 }),
        fc.array(fc.integer({ min: 0, max: 80 }), { maxLength: 12 }),
        fc.boolean(),
        fc.integer({ min: 2, max: 12 }),
        async (entries, signedAt, archiveOk, capacity) => {
          // Digests below `entries` are held by the file; the others are not.
          const text = file(
            entries,
            signedAt.map((i) => hex(i)),
            archiveOk ? hex(0, 'archive') : hex(0, 'elsewhere'),
          );
          expect(await outcome(text, capacity)).toEqual(await outcome(text));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a file with no reference problem is accepted at any capacity', async () => {
    const text = file(120, [hex(1), hex(2), hex(119)]);
    expect(await outcome(text, 2)).toEqual({ ok: true, rows: 126 });
  });
});

/**
 * `text` verified in calls of at most `budget` bytes each, the state between two calls only what
 * `save` gave, through JSON (as it is kept in R2), each call reading from the offset it names.
 */
async function inCalls(text: string, budget: number, capacity?: number) {
  const bytes = new TextEncoder().encode(text);
  const from = (offset: number, first: number) =>
    splitLinesFrom(chunked(bytes.subarray(offset), [7, 50]), offset, first);
  let saved: SavedVerification | null = null;
  let calls = 0;
  try {
    for (;;) {
      calls += 1;
      const v: Verification =
        saved === null
          ? Verification.start(port, { reference_capacity: capacity })
          : Verification.resume(port, saved);
      const r = await v.run(from, budget);
      if ('done' in r) return { calls, outcome: { ok: true, found: r.done } };
      saved = JSON.parse(JSON.stringify(v.save())) as SavedVerification;
    }
  } catch (e) {
    return { calls, outcome: { ok: false, message: (e as Error).message } };
  }
}

/**
 * `inCalls`, but before the calls listed in `rollbacks` (by call number) the state put back is an
 * earlier one of this same verification (`pick` chooses which): what a replay of an older sealed
 * state of the same upload does.
 */
async function withRollbacks(
  text: string,
  budget: number,
  capacity: number | undefined,
  rollbacks: readonly number[],
  pick: number,
) {
  const bytes = new TextEncoder().encode(text);
  const from = (offset: number, first: number) =>
    splitLinesFrom(chunked(bytes.subarray(offset), [11]), offset, first);
  const states: SavedVerification[] = [];
  try {
    for (let call = 1; ; call++) {
      const back = rollbacks.includes(call) && states.length > 1;
      const saved = back ? states[pick % states.length] : states.at(-1);
      const v =
        saved === undefined
          ? Verification.start(port, { reference_capacity: capacity })
          : Verification.resume(port, JSON.parse(JSON.stringify(saved)) as SavedVerification);
      const r = await v.run(from, budget);
      if ('done' in r) return { ok: true, found: r.done };
      states.push(v.save());
    }
  } catch (e) {
    return { ok: false, message: (e as Error).message };
  }
}

const whole = async (text: string, capacity?: number) => {
  try {
    return { ok: true, found: await verifySource(port, textSource(text), { reference_capacity: capacity }) };
  } catch (e) {
    return { ok: false, message: (e as Error).message };
  }
};

describe('a verification in several calls', () => {
  it('property: any budget per call gives the outcome of one call (what it found, or the same refusal)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 40 }),
        fc.array(fc.integer({ min: 0, max: 50 }), { maxLength: 8 }),
        fc.boolean(),
        fc.option(fc.integer({ min: 2, max: 10 }), { nil: undefined }),
        fc.integer({ min: 1, max: 3000 }),
        async (entries, signedAt, archiveOk, capacity, budget) => {
          const text = file(
            entries,
            signedAt.map((i) => hex(i)),
            archiveOk ? hex(0, 'archive') : hex(0, 'elsewhere'),
          );
          const { outcome } = await inCalls(text, budget, capacity);
          expect(outcome).toEqual(await whole(text, capacity));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('property: an earlier state of the same verification put back costs calls, never the outcome', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 30 }),
        fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 6 }),
        fc.boolean(),
        fc.option(fc.integer({ min: 2, max: 8 }), { nil: undefined }),
        fc.integer({ min: 100, max: 2000 }),
        fc.uniqueArray(fc.integer({ min: 2, max: 40 }), { maxLength: 4 }),
        fc.nat(),
        async (entries, signedAt, archiveOk, capacity, budget, rollbacks, pick) => {
          const text = file(
            entries,
            signedAt.map((i) => hex(i)),
            archiveOk ? hex(0, 'archive') : hex(0, 'elsewhere'),
          );
          const got = await withRollbacks(text, budget, capacity, rollbacks, pick);
          expect(got).toEqual(await whole(text, capacity));
        },
      ),
      { numRuns: 40 },
    );
  });

  it('stops at its budget and goes on, through the first read and the partitions', async () => {
    const text = file(60, [hex(1), hex(59)]);
    const one = await inCalls(text, Number.POSITIVE_INFINITY, 4);
    expect(one.calls).toBe(1);
    const many = await inCalls(text, 500, 4);
    // Each call reads at most its budget and one line more; every read (the first and one per
    // partition) is spread over calls.
    expect(many.calls).toBeGreaterThan(Math.ceil(text.length / 500));
    expect(many.outcome).toEqual(one.outcome);
    expect(many.outcome).toMatchObject({ ok: true, found: { rows_total: 65 } });
  });

  it('a line refused in a later call is named by its line in the file', async () => {
    const rows = file(30, [hex(2)])
      .trimEnd()
      .split('\n');
    rows[20] = (rows[20] as string).replace('{', '{ ');
    const text = `${rows.join('\n')}\n`;
    const many = await inCalls(text, 300);
    expect(many.calls).toBeGreaterThan(1);
    expect(many.outcome).toEqual({
      ok: false,
      message: 'import refused, nothing written: line 21: not in canonical form (RFC 8785)',
    });
    expect(many.outcome).toEqual(await whole(text));
  });

  it('the forms at the edges of a line (no final newline, CRLF, an empty line, a BOM, an empty file) end as in one call', async () => {
    const good = file(6, [hex(1), hex(4)]);
    const lines = good.trimEnd().split('\n');
    const texts = [
      good.trimEnd(),
      `${good}\n`,
      `${lines.join('\r\n')}\r\n`,
      `${lines.slice(0, 3).join('\n')}\n\n${lines.slice(3).join('\n')}\n`,
      `\uFEFF${good}`,
      '',
      '\n',
    ];
    for (const text of texts) {
      const one = await whole(text);
      // Each call one line, a few lines, or the whole file.
      for (const budget of [1, 350, 900, text.length + 1])
        expect((await inCalls(text, budget)).outcome).toEqual(one);
    }
    expect(await whole(good.trimEnd())).toMatchObject({ ok: true });
  });

  it('a value the kept state cannot hold (a text seq, a text creation time) is refused in any number of calls', async () => {
    // JSON keeps no NaN or Infinity: `Number("Infinity")` held as the last seq would come back
    // as null, and a later signature out of order would pass once the state had been kept.
    const quota = row('tenant_quotas', {});
    const tenant = (created: string | number) =>
      row('tenants', { name: 'verifier', policy_sha256: hex(0, 'policy'), created_at_unix_ms: created });
    const signature = (seq: string | number, sha: string) =>
      row('receipt_signatures', {
        seq,
        receipt_sha256: sha,
        envelope: canonicalize({ issued_at_unix_ms: 5, receipt_sha256: sha, tenant_id: T }),
        created_at_unix_ms: 5,
      });
    const rest = [
      row('receipt_archives', { archive_sha256: hex(0, 'archive') }),
      ...[1, 2].map((i) =>
        row('receipt_archive_entries', { sha256: hex(i), archive_sha256: hex(0, 'archive') }),
      ),
    ];
    const files = [
      [quota, tenant(1), signature('Infinity', hex(1)), signature(2, hex(2)), ...rest],
      [quota, tenant(1), signature('1e999', hex(1)), ...rest],
      [quota, tenant('x'), ...rest],
      [quota, tenant('Infinity'), ...rest],
    ].map((lines) => `${lines.join('\n')}\n`);
    for (const text of files) {
      const one = await whole(text);
      expect(one.ok).toBe(false);
      for (const budget of [1, 200, 400]) expect((await inCalls(text, budget)).outcome).toEqual(one);
    }
  });
});

describe('each value as its column holds it (checked before anything is written)', () => {
  // Every column of every tenant table but tenant_id (`row` sets it; it has its own check).
  const columns = Object.keys(TENANT_TABLES).flatMap((table) =>
    (tenantTableColumns(table) ?? []).filter((c) => c.name !== 'tenant_id').map((c) => ({ table, c })),
  );
  const refusal = (table: string, name: string) =>
    `import refused, nothing written: line 1: column "${name}" of ${table} is`;

  it('a null in any NOT NULL column is refused at its line; in a nullable column it is not refused', async () => {
    let notNull = 0;
    for (const { table, c } of columns) {
      const r = await whole(`${row(table, { [c.name]: null })}\n`);
      if (c.notNull) {
        notNull++;
        expect(r).toEqual({
          ok: false,
          message: `${refusal(table, c.name)} null (the column is NOT NULL)`,
        });
      } else if (!r.ok) {
        expect(r.message).not.toContain(refusal(table, c.name));
      }
    }
    // The schema has NOT NULL columns in every table: the loop above checked them.
    expect(notNull).toBeGreaterThan(Object.keys(TENANT_TABLES).length);
  });

  it('property: a value of another type than its column (text for an integer, an integer for text, anything else) is refused', async () => {
    const notInteger = fc.oneof(
      fc.string(),
      fc.integer().map(String),
      fc.boolean(),
      // Fractions only: an integer-valued number past 2^53 is refused earlier, as not json (below).
      fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)),
      fc.array(fc.integer(), { maxLength: 2 }),
      fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
    );
    const notText = fc.oneof(
      fc.maxSafeInteger(),
      fc.boolean(),
      fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 }),
      fc.dictionary(fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 }), { maxKeys: 2 }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc
          .constantFrom(...columns)
          .chain(({ table, c }) =>
            (c.type === 'text' ? notText : notInteger).map((value) => ({ table, c, value })),
          ),
        async ({ table, c, value }) => {
          const r = await whole(
            `${canonicalize({ row: { ...JSON.parse(row(table, {})).row, [c.name]: value }, table })}\n`,
          );
          expect(r).toEqual({
            ok: false,
            message: `${refusal(table, c.name)} not ${c.type === 'text' ? 'text' : 'an integer'}${c.notNull ? '' : ' or null'}`,
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('an integer past the safe range is refused before any column is looked at (not json)', async () => {
    for (const value of ['9007199254740992', '1e20', '-9007199254740993']) {
      const line = row('runs', {}).replace('"max_calls":0', `"max_calls":${value}`);
      expect(line).toContain(`"max_calls":${value}`);
      expect(await whole(`${line}\n`)).toMatchObject({ ok: false });
    }
  });

  it('the columns the import checks are the ones the drizzle schema declares, TEXT or INTEGER', () => {
    for (const table of Object.keys(TENANT_TABLES)) {
      const cs = tenantTableColumns(table) ?? [];
      expect(cs.length).toBeGreaterThan(1);
      for (const c of cs) expect(['text', 'integer']).toContain(c.type);
    }
    expect(tenantTableColumns('principals')).toContainEqual({
      name: 'key_sha256',
      type: 'text',
      notNull: true,
    });
    expect(tenantTableColumns('principals')).toContainEqual({
      name: 'revoked_at_unix_ms',
      type: 'integer',
      notNull: false,
    });
    expect(tenantTableColumns('webhook_secrets')).toBeNull();
  });
});

async function* chunked(bytes: Uint8Array, cuts: readonly number[]): AsyncGenerator<Uint8Array> {
  let at = 0;
  for (const c of [...cuts].sort((a, b) => a - b)) {
    if (c <= at || c >= bytes.byteLength) continue;
    yield bytes.slice(at, c);
    at = c;
  }
  yield bytes.slice(at);
}

const collect = async (it: AsyncIterable<string>) => {
  const out: string[] = [];
  for await (const l of it) out.push(l);
  return out;
};

describe('splitLines', () => {
  it('property: the lines of any cut of the bytes are the lines of the text', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀', '\n', '"', '{') }), { maxLength: 8 }),
        fc.array(fc.nat({ max: 64 }), { maxLength: 6 }),
        async (parts, cuts) => {
          const text = parts.join('');
          const lines = text.split('\n');
          if (lines.at(-1) === '') lines.pop();
          const got = await collect(splitLines(chunked(new TextEncoder().encode(text), cuts)));
          expect(got).toEqual(lines);
        },
      ),
    );
  });

  it('refuses a line past the bound as it grows, and bytes that are not UTF-8, naming the line', async () => {
    const long = new TextEncoder().encode(`ok\n${'x'.repeat(40)}\nnever`);
    await expect(collect(splitLines(chunked(long, [5, 10, 20]), 32))).rejects.toThrow(
      /line 2: not json \(too_large\)/,
    );
    const bad = new Uint8Array([0x61, 0x0a, 0x62, 0xff, 0x0a]);
    await expect(collect(splitLines(chunked(bad, [3]), 32))).rejects.toThrow(/line 2: not valid UTF-8/);
    // A byte-order mark is kept, so the line is not JSON and the import refuses it.
    const bom = new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d]);
    expect(await collect(splitLines(chunked(bom, []), 32))).toEqual(['\uFEFF{}']);
  });
});
