/**
 * Contract discovery (`compareDiscovery`), held to its guarantees: an advertised tool is
 * `matches_reviewed` / `matches_quarantined` only when its digest is pinned, otherwise `drifted`
 * (every unquarantined pinned version of its name, and never a quarantined one, listed for
 * quarantine; the closest reviewed version is the one with the fewest differing fields, then the
 * newest) or `unreviewed`; a pinned, still-usable tool the snapshot omits is `not_advertised`;
 * widening is judged by effect rank, added capabilities, larger limits, lost idempotency or
 * reversibility and any resource-map change. The report is deterministic and independent of key
 * and list order, and a snapshot that is malformed or names a tool twice cannot be evaluated.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../../src/core/canonical/canonical.js';
import { contractDigest, pinContract } from '../../../../src/core/contracts/contract.js';
import { deepFreeze } from '../../../../src/core/canonical/digest-cache.js';
import {
  changedFields,
  compareDiscovery,
  type DiscoveryReport,
  type PinnedForDiscovery,
  type ToolDiscovery,
  widening,
} from '../../../../src/core/contracts/discovery.js';
import type { CoreError } from '../../../../src/core/errors.js';
import { TOOL_EFFECTS, type ToolContract, type ToolEffect } from '../../../../src/core/model.js';
import { buildContract, buildReadOnlyContract, LIMITS, READ_TOOL, T, TOOL } from '../fixtures.js';

const RUNS = { seed: 0xd15c, numRuns: 200, endOnFailure: true } as const;
const SOURCE = 'mcp://deploy-tools tools/list';
const OBSERVED = T.now;
/** Pinning instants: older versions are pinned earlier. */
const PINNED_AT = { oldest: T.grantNotBefore, older: T.requestedAt, newest: T.now } as const;

type Snapshot = { source: string; observed_at_unix_ms: number; tools: unknown[] };

function snapshotOf(tools: readonly unknown[]): Snapshot {
  return { source: SOURCE, observed_at_unix_ms: OBSERVED, tools: [...tools] };
}

function pin(
  contract: ToolContract,
  quarantined = false,
  pinnedAt: number = PINNED_AT.newest,
): PinnedForDiscovery {
  return {
    tool_contract_sha256: contractDigest(contract),
    contract,
    quarantined,
    pinned_at_unix_ms: pinnedAt,
  };
}

function with_(base: ToolContract, patch: Partial<ToolContract>): ToolContract {
  return { ...structuredClone(base), ...patch };
}

function mustCompare(snapshot: unknown, pinned: readonly PinnedForDiscovery[]): DiscoveryReport {
  const r = compareDiscovery(snapshot, pinned);
  if (!r.ok) throw new Error(`expected a report, got ${r.error.reason}: ${JSON.stringify(r.error.issues)}`);
  return r.value;
}

function refusal(snapshot: unknown, pinned: readonly PinnedForDiscovery[] = []): CoreError {
  const r = compareDiscovery(snapshot, pinned);
  if (r.ok) throw new Error(`expected "cannot evaluate", got a report: ${JSON.stringify(r.value)}`);
  return r.error;
}

function entry(report: DiscoveryReport, name: string): ToolDiscovery {
  const found = report.tools.filter((t) => t.tool_name === name);
  if (found.length !== 1) throw new Error(`expected one entry for ${name}, got ${found.length}`);
  return found[0] as ToolDiscovery;
}

/** The same JSON value with the keys of every object in reverse order. */
function reverseKeys<V>(v: V): V {
  if (Array.isArray(v)) return v.map(reverseKeys) as V;
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .reverse()
        .map((k) => [k, reverseKeys((v as Record<string, unknown>)[k])]),
    ) as V;
  }
  return v;
}

/** The distinct paths a refusal names (an empty string fails both `min` and `regex`, say). */
const issuePaths = (e: CoreError) => [...new Set(e.issues.map((i) => i.path))];

const sorted = (xs: readonly string[]) => [...xs].sort();

// ---------------------------------------------------------------------------------------------

describe('a snapshot equal to the pinned contracts', () => {
  const pinned = () => [pin(buildContract()), pin(buildReadOnlyContract())];
  const snap = () => snapshotOf([buildContract(), buildReadOnlyContract()]);

  it('reports every tool as matches_reviewed and quarantines nothing', () => {
    const report = mustCompare(snap(), pinned());
    expect(report).toStrictEqual({
      source: SOURCE,
      observed_at_unix_ms: OBSERVED,
      snapshot_sha256: digestOf(snap()),
      quarantine: [],
      tools: [
        {
          tool_name: TOOL,
          status: 'matches_reviewed',
          discovered_sha256: contractDigest(buildContract()),
          pinned_sha256: [contractDigest(buildContract())],
          closest_reviewed_sha256: null,
          changed_fields: [],
          widens: [],
          quarantine: [],
        },
        {
          tool_name: READ_TOOL,
          status: 'matches_reviewed',
          discovered_sha256: contractDigest(buildReadOnlyContract()),
          pinned_sha256: [contractDigest(buildReadOnlyContract())],
          closest_reviewed_sha256: null,
          changed_fields: [],
          widens: [],
          quarantine: [],
        },
      ],
    });
  });

  it('is deterministic: the same input twice gives equal reports', () => {
    expect(mustCompare(snap(), pinned())).toStrictEqual(mustCompare(snap(), pinned()));
  });

  it('does not depend on the key order of any snapshot object', () => {
    const reversed = reverseKeys(snap());
    expect(Object.keys(reversed)).toEqual(['tools', 'observed_at_unix_ms', 'source']);
    expect(mustCompare(reversed, pinned())).toStrictEqual(mustCompare(snap(), pinned()));
  });

  it('names the snapshot by the digest of its parsed content', () => {
    const report = mustCompare(snap(), pinned());
    expect(report.snapshot_sha256).toBe(digestOf(snap()));
    const later = { ...snap(), observed_at_unix_ms: OBSERVED + 1 };
    const other = mustCompare(later, pinned());
    expect(other.snapshot_sha256).toBe(digestOf(later));
    expect(other.snapshot_sha256).not.toBe(report.snapshot_sha256);
    expect(other.observed_at_unix_ms).toBe(OBSERVED + 1);
  });

  it('accepts frozen pinned contracts and snapshots, and mutates neither', () => {
    const p = pinned().map((x) => ({ ...x, contract: pinContract(x.contract) }));
    const s = deepFreeze(snap());
    const before = structuredClone({ p, s });
    const report = mustCompare(s, p);
    expect(report.tools.map((t) => t.status)).toEqual(['matches_reviewed', 'matches_reviewed']);
    expect({ p, s }).toStrictEqual(before);
  });

  it('reports an empty snapshot against no pinned contracts as empty', () => {
    expect(mustCompare(snapshotOf([]), [])).toStrictEqual({
      source: SOURCE,
      observed_at_unix_ms: OBSERVED,
      snapshot_sha256: digestOf(snapshotOf([])),
      tools: [],
      quarantine: [],
    });
  });
});

// ---------------------------------------------------------------------------------------------

interface FieldCase {
  readonly name: string;
  readonly field: keyof ToolContract;
  readonly base: () => ToolContract;
  readonly change: Partial<ToolContract>;
  readonly widens: readonly string[];
}

const rollback = buildContract;
const reader = buildReadOnlyContract;
const otherDigest = (n: number) => digestOf({ schema: 'changed', n });

const FIELD_CASES: readonly FieldCase[] = [
  {
    name: 'schema_version',
    field: 'schema_version',
    base: rollback,
    change: { schema_version: 2 },
    widens: [],
  },
  {
    name: 'contract_release',
    field: 'contract_release',
    base: rollback,
    change: { contract_release: 'execute_rollback 2026.02.0' },
    widens: [],
  },
  {
    name: 'executor_release (drift without widening)',
    field: 'executor_release',
    base: rollback,
    change: { executor_release: 'rollback-executor 9.9.9' },
    widens: [],
  },
  {
    name: 'input_schema_sha256',
    field: 'input_schema_sha256',
    base: rollback,
    change: { input_schema_sha256: otherDigest(1) },
    widens: [],
  },
  {
    name: 'output_schema_sha256',
    field: 'output_schema_sha256',
    base: rollback,
    change: { output_schema_sha256: otherDigest(2) },
    widens: [],
  },
  {
    name: 'effect external_write -> irreversible',
    field: 'effect',
    base: rollback,
    change: { effect: 'irreversible' },
    widens: ['effect'],
  },
  {
    name: 'effect external_write -> creates_draft',
    field: 'effect',
    base: rollback,
    change: { effect: 'creates_draft' },
    widens: [],
  },
  {
    name: 'effect external_write -> read_only',
    field: 'effect',
    base: rollback,
    change: { effect: 'read_only' },
    widens: [],
  },
  {
    name: 'effect read_only -> creates_draft',
    field: 'effect',
    base: reader,
    change: { effect: 'creates_draft' },
    widens: ['effect'],
  },
  {
    name: 'capability added',
    field: 'required_capabilities',
    base: rollback,
    change: { required_capabilities: ['deployment:delete', 'deployment:read', 'deployment:rollback'] },
    widens: ['required_capabilities'],
  },
  {
    name: 'capability removed',
    field: 'required_capabilities',
    base: rollback,
    change: { required_capabilities: ['deployment:rollback'] },
    widens: [],
  },
  {
    name: 'every capability removed',
    field: 'required_capabilities',
    base: reader,
    change: { required_capabilities: [] },
    widens: [],
  },
  {
    name: 'capability replaced by another',
    field: 'required_capabilities',
    base: rollback,
    change: { required_capabilities: ['deployment:read', 'deployment:scale'] },
    widens: ['required_capabilities'],
  },
  {
    name: 'idempotency key_required -> not_required',
    field: 'idempotency',
    base: rollback,
    change: { idempotency: 'not_required' },
    widens: ['idempotency'],
  },
  {
    name: 'idempotency not_required -> key_required',
    field: 'idempotency',
    base: reader,
    change: { idempotency: 'key_required' },
    widens: [],
  },
  {
    name: 'reversible true -> false',
    field: 'reversible',
    base: rollback,
    change: { reversible: false },
    widens: ['reversible'],
  },
  {
    name: 'reversible false -> true',
    field: 'reversible',
    base: reader,
    change: { reversible: true },
    widens: [],
  },
  ...(['timeout_ms', 'max_input_bytes', 'max_output_bytes'] as const).flatMap((field) => {
    const value = buildContract()[field];
    return [
      { name: `${field} larger`, field, base: rollback, change: { [field]: value + 1 }, widens: [field] },
      { name: `${field} smaller`, field, base: rollback, change: { [field]: value - 1 }, widens: [] },
    ];
  }),
  {
    name: 'resource type changed',
    field: 'resource',
    base: rollback,
    change: {
      resource: { type: 'database', attributes: { environment: '/environment', service: '/service' } },
    },
    widens: ['resource'],
  },
  {
    name: 'resource attribute added',
    field: 'resource',
    base: rollback,
    change: {
      resource: {
        type: 'deployment',
        attributes: { environment: '/environment', region: '/region', service: '/service' },
      },
    },
    widens: ['resource'],
  },
  {
    name: 'resource attribute removed',
    field: 'resource',
    base: rollback,
    change: { resource: { type: 'deployment', attributes: { service: '/service' } } },
    widens: ['resource'],
  },
  {
    name: 'resource attribute pointer changed',
    field: 'resource',
    base: rollback,
    change: { resource: { type: 'deployment', attributes: { environment: '/env', service: '/service' } } },
    widens: ['resource'],
  },
];

describe('one field changed at a time', () => {
  it('covers every contract field except tool_name', () => {
    const covered = new Set(FIELD_CASES.map((c) => c.field));
    const all = Object.keys(buildContract()).filter((k) => k !== 'tool_name');
    expect(sorted([...covered])).toEqual(sorted(all));
  });

  it.each(FIELD_CASES)('$name: drifted, changes exactly that field', (c) => {
    const base = c.base();
    const name = base.tool_name;
    const advertised = with_(base, c.change);
    expect(changedFields(base, advertised)).toEqual([c.field]);

    // Three pinned versions of the tool: the current reviewed one (closest), an older reviewed
    // one two fields away, and a newer quarantined one that must never be listed or chosen.
    const older = with_(base, {
      contract_release: `${name} 2025.12.0`,
      executor_release: 'executor 0.9.0',
    });
    const bad = with_(base, { contract_release: `${name} 2025.11.0-bad` });
    const pinnedBase = pin(base, false, PINNED_AT.older);
    const pinnedOlder = pin(older, false, PINNED_AT.oldest);
    const pinnedBad = pin(bad, true, PINNED_AT.newest);
    // A companion tool that still matches, so the top-level list is exactly this tool's versions.
    const companion = name === TOOL ? buildReadOnlyContract() : buildContract();

    const report = mustCompare(snapshotOf([advertised, companion]), [
      pinnedBad,
      pinnedOlder,
      pinnedBase,
      pin(companion),
    ]);
    const reviewedDigests = sorted([pinnedBase.tool_contract_sha256, pinnedOlder.tool_contract_sha256]);
    expect(entry(report, name)).toStrictEqual({
      tool_name: name,
      status: 'drifted',
      discovered_sha256: contractDigest(advertised),
      pinned_sha256: sorted([...reviewedDigests, pinnedBad.tool_contract_sha256]),
      closest_reviewed_sha256: pinnedBase.tool_contract_sha256,
      changed_fields: [c.field],
      widens: [...c.widens],
      quarantine: reviewedDigests,
    });
    expect(entry(report, companion.tool_name).status).toBe('matches_reviewed');
    expect(report.quarantine).toStrictEqual(reviewedDigests);
    expect(widening(base, advertised)).toEqual([...c.widens]);
  });

  it('lists several changed fields and widenings sorted', () => {
    const base = buildContract();
    const advertised = with_(base, {
      timeout_ms: LIMITS.timeoutMs * 2,
      required_capabilities: ['deployment:delete', 'deployment:read', 'deployment:rollback'],
      effect: 'irreversible',
      executor_release: 'rollback-executor 2.0.0',
      max_input_bytes: LIMITS.maxInputBytes - 1,
    });
    const t = entry(mustCompare(snapshotOf([advertised]), [pin(base)]), TOOL);
    expect(t.changed_fields).toEqual([
      'effect',
      'executor_release',
      'max_input_bytes',
      'required_capabilities',
      'timeout_ms',
    ]);
    expect(t.widens).toEqual(['effect', 'required_capabilities', 'timeout_ms']);
  });
});

describe('widening by effect rank', () => {
  const pairs = TOOL_EFFECTS.flatMap((from, i) =>
    TOOL_EFFECTS.map(
      (to, j) => ({ from, to, wider: j > i }) as { from: ToolEffect; to: ToolEffect; wider: boolean },
    ),
  );

  it.each(pairs)('$from -> $to widens: $wider', ({ from, to, wider }) => {
    const reviewed = with_(buildReadOnlyContract(), { effect: from });
    const discovered = with_(buildReadOnlyContract(), { effect: to });
    expect(widening(reviewed, discovered)).toEqual(wider ? ['effect'] : []);
  });

  it('an unchanged contract widens nothing and changes nothing', () => {
    expect(widening(buildContract(), buildContract())).toEqual([]);
    expect(changedFields(buildContract(), buildContract())).toEqual([]);
    expect(changedFields(buildContract(), reverseKeys(buildContract()))).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('several pinned versions of one tool', () => {
  // v1 and v2 are reviewed (v2 newer), v3 is quarantined. Each differs in contract_release.
  const v1 = () => with_(buildContract(), { contract_release: 'execute_rollback 2025.10.0' });
  const v2 = () => with_(buildContract(), { contract_release: 'execute_rollback 2025.11.0' });
  const v3 = () => with_(buildContract(), { contract_release: 'execute_rollback 2025.12.0' });
  const pinned = () => [
    pin(v1(), false, PINNED_AT.oldest),
    pin(v2(), false, PINNED_AT.older),
    pin(v3(), true, PINNED_AT.newest),
  ];
  const all = () => sorted(pinned().map((p) => p.tool_contract_sha256));

  it('drift quarantines every unquarantined version and never the quarantined one', () => {
    const advertised = with_(buildContract(), { contract_release: 'execute_rollback 2026.02.0' });
    const report = mustCompare(snapshotOf([advertised]), pinned());
    const t = entry(report, TOOL);
    expect(t.status).toBe('drifted');
    expect(t.quarantine).toStrictEqual(sorted([contractDigest(v1()), contractDigest(v2())]));
    expect(t.quarantine).not.toContain(contractDigest(v3()));
    expect(report.quarantine).toStrictEqual(t.quarantine);
    expect(t.pinned_sha256).toStrictEqual(all());
    // Every version is one field away: the tie goes to the newest reviewed one, never to v3.
    expect(t.closest_reviewed_sha256).toBe(contractDigest(v2()));
  });

  it('matching an older reviewed version is matches_reviewed, with nothing to quarantine', () => {
    const report = mustCompare(snapshotOf([v1()]), pinned());
    expect(report.tools).toStrictEqual([
      {
        tool_name: TOOL,
        status: 'matches_reviewed',
        discovered_sha256: contractDigest(v1()),
        pinned_sha256: all(),
        closest_reviewed_sha256: null,
        changed_fields: [],
        widens: [],
        quarantine: [],
      },
    ]);
    expect(report.quarantine).toEqual([]);
  });

  it('matching a quarantined version is matches_quarantined, with nothing to quarantine', () => {
    const report = mustCompare(snapshotOf([v3()]), pinned());
    expect(report.tools).toStrictEqual([
      {
        tool_name: TOOL,
        status: 'matches_quarantined',
        discovered_sha256: contractDigest(v3()),
        pinned_sha256: all(),
        closest_reviewed_sha256: null,
        changed_fields: [],
        widens: [],
        quarantine: [],
      },
    ]);
    expect(report.quarantine).toEqual([]);
  });

  it('the closest is the one with the fewest differing fields, even when older', () => {
    const advertised = with_(buildContract(), { timeout_ms: LIMITS.timeoutMs + 1 });
    const near = pin(with_(buildContract(), { executor_release: 'rollback-executor 1.0.0' }), false, 1);
    const far = pin(
      with_(buildContract(), { executor_release: 'rollback-executor 2.0.0', max_output_bytes: 1 }),
      false,
      2,
    );
    for (const list of [
      [near, far],
      [far, near],
    ]) {
      const t = entry(mustCompare(snapshotOf([advertised]), list), TOOL);
      expect(t.closest_reviewed_sha256).toBe(near.tool_contract_sha256);
      expect(t.changed_fields).toEqual(['executor_release', 'timeout_ms']);
      expect(t.widens).toEqual(['timeout_ms']);
    }
  });

  it('ties in the number of differing fields go to the newest, whatever the list order', () => {
    const advertised = with_(buildContract(), { timeout_ms: LIMITS.timeoutMs + 1 });
    const old = pin(with_(buildContract(), { contract_release: 'a' }), false, 10);
    const mid = pin(with_(buildContract(), { contract_release: 'b' }), false, 20);
    const young = pin(with_(buildContract(), { contract_release: 'c' }), false, 30);
    for (const list of [
      [old, mid, young],
      [young, mid, old],
      [mid, young, old],
    ]) {
      const t = entry(mustCompare(snapshotOf([advertised]), list), TOOL);
      expect(t.closest_reviewed_sha256).toBe(young.tool_contract_sha256);
      expect(t.changed_fields).toEqual(['contract_release', 'timeout_ms']);
    }
  });

  it('ties at the same pinning instant are broken by digest, whatever the list order', () => {
    const advertised = with_(buildContract(), { timeout_ms: LIMITS.timeoutMs + 1 });
    const a = pin(with_(buildContract(), { contract_release: 'a' }), false, 10);
    const b = pin(with_(buildContract(), { contract_release: 'b' }), false, 10);
    const [first] = sorted([a.tool_contract_sha256, b.tool_contract_sha256]);
    const one = entry(mustCompare(snapshotOf([advertised]), [a, b]), TOOL);
    const two = entry(mustCompare(snapshotOf([advertised]), [b, a]), TOOL);
    expect(one.closest_reviewed_sha256).toBe(first);
    expect(two).toStrictEqual(one);
  });

  it('a closer quarantined version is never the closest while a reviewed one exists', () => {
    const advertised = with_(buildContract(), { timeout_ms: LIMITS.timeoutMs + 1 });
    const quarantinedNear = pin(with_(buildContract(), { contract_release: 'q' }), true, 99);
    const reviewedFar = pin(
      with_(buildContract(), { contract_release: 'r', executor_release: 'x', max_input_bytes: 1 }),
      false,
      1,
    );
    const t = entry(mustCompare(snapshotOf([advertised]), [quarantinedNear, reviewedFar]), TOOL);
    expect(t.closest_reviewed_sha256).toBe(reviewedFar.tool_contract_sha256);
    expect(t.changed_fields).toEqual([
      'contract_release',
      'executor_release',
      'max_input_bytes',
      'timeout_ms',
    ]);
    expect(t.widens).toEqual(['max_input_bytes', 'timeout_ms']);
    expect(t.quarantine).toEqual([reviewedFar.tool_contract_sha256]);
  });

  it('drift when every version is quarantined: nothing to quarantine, closest among the quarantined', () => {
    const advertised = with_(buildContract(), { timeout_ms: LIMITS.timeoutMs + 1 });
    const far = pin(with_(buildContract(), { contract_release: 'f', executor_release: 'f' }), true, 50);
    const oldNear = pin(with_(buildContract(), { contract_release: 'o' }), true, 10);
    const newNear = pin(with_(buildContract(), { contract_release: 'n' }), true, 20);
    for (const list of [
      [far, oldNear, newNear],
      [newNear, oldNear, far],
    ]) {
      const report = mustCompare(snapshotOf([advertised]), list);
      const t = entry(report, TOOL);
      expect(t.status).toBe('drifted');
      expect(t.quarantine).toEqual([]);
      expect(report.quarantine).toEqual([]);
      expect(t.closest_reviewed_sha256).toBe(newNear.tool_contract_sha256);
      expect(t.changed_fields).toEqual(['contract_release', 'timeout_ms']);
      expect(t.widens).toEqual(['timeout_ms']);
      expect(t.pinned_sha256).toEqual(sorted(list.map((p) => p.tool_contract_sha256)));
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe('unreviewed and not_advertised', () => {
  it('an advertised tool with no pinned contract of its name is unreviewed, not quarantined', () => {
    const report = mustCompare(snapshotOf([buildContract(), buildReadOnlyContract()]), [
      pin(buildContract()),
    ]);
    expect(entry(report, READ_TOOL)).toStrictEqual({
      tool_name: READ_TOOL,
      status: 'unreviewed',
      discovered_sha256: contractDigest(buildReadOnlyContract()),
      pinned_sha256: [],
      closest_reviewed_sha256: null,
      changed_fields: [],
      widens: [],
      quarantine: [],
    });
    expect(report.quarantine).toEqual([]);
  });

  it('is unreviewed even when another tool pins the very same definition under its own name', () => {
    const renamed = with_(buildContract(), { tool_name: 'execute_rollback_v2' });
    const report = mustCompare(snapshotOf([renamed]), [pin(buildContract())]);
    expect(entry(report, 'execute_rollback_v2').status).toBe('unreviewed');
    expect(entry(report, TOOL).status).toBe('not_advertised');
    expect(report.quarantine).toEqual([]);
  });

  it('a pinned tool missing from the snapshot is not_advertised, listing every pinned version', () => {
    const quarantinedOld = pin(with_(buildReadOnlyContract(), { contract_release: 'old' }), true, 1);
    const reviewed = pin(buildReadOnlyContract(), false, 2);
    const report = mustCompare(snapshotOf([buildContract()]), [
      pin(buildContract()),
      reviewed,
      quarantinedOld,
    ]);
    expect(entry(report, READ_TOOL)).toStrictEqual({
      tool_name: READ_TOOL,
      status: 'not_advertised',
      discovered_sha256: null,
      pinned_sha256: sorted([reviewed.tool_contract_sha256, quarantinedOld.tool_contract_sha256]),
      closest_reviewed_sha256: null,
      changed_fields: [],
      widens: [],
      quarantine: [],
    });
    expect(report.quarantine).toEqual([]);
  });

  it('a pinned tool whose every version is quarantined has no entry when not advertised', () => {
    const report = mustCompare(snapshotOf([buildContract()]), [
      pin(buildContract()),
      pin(buildReadOnlyContract(), true),
      pin(with_(buildReadOnlyContract(), { contract_release: 'old' }), true, 1),
    ]);
    expect(report.tools.map((t) => t.tool_name)).toEqual([TOOL]);
    expect(report.quarantine).toEqual([]);
  });

  it('an empty snapshot reports every still-usable pinned tool as not_advertised', () => {
    const report = mustCompare(snapshotOf([]), [pin(buildContract()), pin(buildReadOnlyContract())]);
    expect(report.tools.map((t) => [t.tool_name, t.status])).toEqual([
      [TOOL, 'not_advertised'],
      [READ_TOOL, 'not_advertised'],
    ]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('refusals ("cannot evaluate")', () => {
  it('refuses a snapshot naming a tool twice (same definition)', () => {
    const e = refusal(snapshotOf([buildContract(), buildReadOnlyContract(), buildContract()]), [
      pin(buildContract()),
    ]);
    expect(e.reason).toBe('invalid_request');
    expect(e.issues).toEqual([{ path: 'snapshot.tools', message: `tool "${TOOL}" appears more than once` }]);
  });

  it('refuses a snapshot naming a tool twice (two definitions)', () => {
    const e = refusal(
      snapshotOf([buildContract(), with_(buildContract(), { effect: 'irreversible', reversible: false })]),
      [pin(buildContract())],
    );
    expect(e.reason).toBe('invalid_request');
    expect(issuePaths(e)).toEqual(['snapshot.tools']);
  });

  it.each([
    ['at the top level', { ...snapshotOf([buildContract()]), extra: 1 }, 'snapshot'],
    ['in a contract', snapshotOf([{ ...buildContract(), description: 'x' }]), 'snapshot.tools[0]'],
    [
      'in a resource map',
      snapshotOf([{ ...buildContract(), resource: { ...buildContract().resource, scope: 'all' } }]),
      'snapshot.tools[0].resource',
    ],
  ])('refuses an unknown field %s', (_, snap, path) => {
    const e = refusal(snap, [pin(buildContract())]);
    expect(e.reason).toBe('invalid_request');
    expect(issuePaths(e)).toEqual([path]);
  });

  it.each([
    ['an unknown effect', { effect: 'delete' }, 'snapshot.tools[1].effect'],
    [
      'an upper-case digest',
      { input_schema_sha256: 'A'.repeat(64) },
      'snapshot.tools[1].input_schema_sha256',
    ],
    ['a fractional limit', { timeout_ms: 1.5 }, 'snapshot.tools[1].timeout_ms'],
    [
      'a malformed capability',
      { required_capabilities: ['rollback'] },
      'snapshot.tools[1].required_capabilities[0]',
    ],
    ['a string for a boolean', { reversible: 'false' }, 'snapshot.tools[1].reversible'],
    ['an empty tool name', { tool_name: '' }, 'snapshot.tools[1].tool_name'],
    [
      'a resource pointer that is not a pointer',
      { resource: { type: 'deployment', attributes: { service: 'service' } } },
      'snapshot.tools[1].resource.attributes.service',
    ],
  ])('refuses a malformed contract inside the snapshot: %s', (_, patch, path) => {
    const e = refusal(snapshotOf([buildReadOnlyContract(), { ...buildContract(), ...patch }]), [
      pin(buildContract()),
    ]);
    expect(e.reason).toBe('invalid_request');
    expect(issuePaths(e)).toEqual([path]);
  });

  it('refuses a contract with a missing field', () => {
    const { effect: _, ...partial } = buildContract();
    const e = refusal(snapshotOf([partial]));
    expect(e.reason).toBe('invalid_request');
    expect(issuePaths(e)).toEqual(['snapshot.tools[0].effect']);
  });

  const many = (n: number) =>
    Array.from({ length: n }, (_, i) => with_(buildReadOnlyContract(), { tool_name: `tool_${i}` }));

  it('refuses more than 512 tools', () => {
    const e = refusal(snapshotOf(many(513)));
    expect(e.reason).toBe('invalid_request');
    expect(issuePaths(e)).toEqual(['snapshot.tools']);
  });

  it('accepts exactly 512 tools', () => {
    const report = mustCompare(snapshotOf(many(512)), []);
    expect(report.tools).toHaveLength(512);
    expect(report.tools.every((t) => t.status === 'unreviewed')).toBe(true);
  });

  it.each([
    ['a missing source', (({ source: _, ...s }) => s)(snapshotOf([])), 'snapshot.source'],
    ['an empty source', { ...snapshotOf([]), source: '' }, 'snapshot.source'],
    ['a source with a control character', { ...snapshotOf([]), source: 'mcp://x\n' }, 'snapshot.source'],
    [
      'a non-integer observed_at',
      { ...snapshotOf([]), observed_at_unix_ms: 1.5 },
      'snapshot.observed_at_unix_ms',
    ],
    [
      'a negative observed_at',
      { ...snapshotOf([]), observed_at_unix_ms: -1 },
      'snapshot.observed_at_unix_ms',
    ],
    ['a string observed_at', { ...snapshotOf([]), observed_at_unix_ms: '1' }, 'snapshot.observed_at_unix_ms'],
    [
      'a missing observed_at',
      (({ observed_at_unix_ms: _, ...s }) => s)(snapshotOf([])),
      'snapshot.observed_at_unix_ms',
    ],
    ['missing tools', (({ tools: _, ...s }) => s)(snapshotOf([])), 'snapshot.tools'],
    ['tools that are not an array', { ...snapshotOf([]), tools: {} }, 'snapshot.tools'],
    ['a null tool', snapshotOf([null]), 'snapshot.tools[0]'],
  ])('refuses %s', (_, snap, path) => {
    const e = refusal(snap, [pin(buildContract())]);
    expect(e.reason).toBe('invalid_request');
    expect(issuePaths(e)).toEqual([path]);
  });

  it.each([
    ['null', null],
    ['an array', [buildContract()]],
    ['a string', JSON.stringify(snapshotOf([buildContract()]))],
    ['a number', 1],
    ['undefined', undefined],
  ])('refuses a %s snapshot', (_, snap) => {
    const e = refusal(snap, [pin(buildContract())]);
    expect(e.reason).toBe('invalid_request');
    expect(issuePaths(e)).toEqual(['snapshot']);
  });

  it('refuses a snapshot with no canonical form (lone surrogate in a resource pointer)', () => {
    const bad = with_(buildContract(), {
      resource: { type: 'deployment', attributes: { environment: '/environment', service: '/\ud800' } },
    });
    const e = refusal(snapshotOf([bad]), [pin(buildContract())]);
    expect(e.reason).toBe('canonicalization_failed');
  });
});

// ---------------------------------------------------------------------------------------------

describe('report ordering', () => {
  it('sorts tools by name (UTF-16 code units) and the top-level quarantine list', () => {
    // 'Zeta' < 'alpha' < 'mid' < 'zeta' by code units (not by locale).
    const names = ['zeta', 'mid', 'alpha', 'Zeta'];
    const base = (n: string) => with_(buildReadOnlyContract(), { tool_name: n });
    const pinned = names.flatMap((n, i) => [
      pin(base(n), false, i),
      pin(with_(base(n), { contract_release: `${n} old` }), false, i),
    ]);
    const advertised = names.map((n) => with_(base(n), { max_output_bytes: 7 }));
    const report = mustCompare(snapshotOf(advertised), pinned);
    expect(report.tools.map((t) => t.tool_name)).toEqual(['Zeta', 'alpha', 'mid', 'zeta']);
    expect(report.tools.every((t) => t.status === 'drifted')).toBe(true);
    const expected = sorted(pinned.map((p) => p.tool_contract_sha256));
    expect(report.quarantine).toStrictEqual(expected);
    for (const t of report.tools) {
      expect(t.quarantine).toStrictEqual(sorted(t.quarantine));
      expect(t.pinned_sha256).toStrictEqual(sorted(t.pinned_sha256));
    }
  });

  it('not_advertised entries are sorted in among the advertised ones', () => {
    const b = with_(buildReadOnlyContract(), { tool_name: 'b_tool' });
    const report = mustCompare(
      snapshotOf([
        with_(buildReadOnlyContract(), { tool_name: 'c_tool' }),
        with_(b, { tool_name: 'a_tool' }),
      ]),
      [pin(b)],
    );
    expect(report.tools.map((t) => [t.tool_name, t.status])).toEqual([
      ['a_tool', 'unreviewed'],
      ['b_tool', 'not_advertised'],
      ['c_tool', 'unreviewed'],
    ]);
  });

  it('the top-level quarantine list is unique even when trusted storage repeats an entry', () => {
    const p = pin(buildContract());
    const report = mustCompare(snapshotOf([with_(buildContract(), { timeout_ms: 1 })]), [p, p]);
    expect(report.quarantine).toStrictEqual([p.tool_contract_sha256]);
    expect(entry(report, TOOL).pinned_sha256).toStrictEqual([p.tool_contract_sha256]);
    expect(entry(report, TOOL).quarantine).toStrictEqual([p.tool_contract_sha256]);
  });
});

describe('inconsistent trusted storage', () => {
  it('a digest stored twice, once quarantined: quarantined whatever the order', () => {
    const reviewed = pin(buildContract());
    const quarantined = { ...reviewed, quarantined: true };
    for (const list of [
      [reviewed, quarantined],
      [quarantined, reviewed],
    ]) {
      const report = mustCompare(snapshotOf([buildContract()]), list);
      expect(entry(report, TOOL).status).toBe('matches_quarantined');
      expect(report.quarantine).toStrictEqual([]);
    }
  });

  it('a pinned digest that is not its contract’s digest is corrupt storage: it throws, acting on nothing', () => {
    const p = pin(buildContract());
    const corrupt = { ...p, tool_contract_sha256: digestOf({ not: 'this contract' }) };
    expect(() => compareDiscovery(snapshotOf([buildContract()]), [corrupt])).toThrow(/does not hash/);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties over random pinned histories and snapshots.

/** Independent single-field edits; any subset of them gives a distinct contract. */
const EDITS: readonly ((c: ToolContract) => void)[] = [
  (c) => (c.contract_release = `${c.tool_name} edited`),
  (c) => (c.executor_release = 'executor edited'),
  (c) => (c.timeout_ms += 1000),
  (c) => (c.max_input_bytes -= 1),
  (c) => (c.effect = c.effect === 'read_only' ? 'creates_draft' : 'irreversible'),
  (c) => (c.required_capabilities = [...c.required_capabilities, 'deployment:zap']),
  (c) => (c.reversible = !c.reversible),
  (c) => (c.resource = { ...c.resource, type: 'service' }),
];
const NAMES = ['get_deployment', 'execute_rollback', 'Scale', 'drain_node'] as const;

function variant(name: string, edits: readonly number[]): ToolContract {
  const c = with_(name === TOOL ? buildContract() : buildReadOnlyContract(), { tool_name: name });
  for (const i of edits) (EDITS[i] as (c: ToolContract) => void)(c);
  return c;
}

const editSet = fc.subarray(EDITS.map((_, i) => i));

/** Per tool name: its pinned versions (possibly none) and what the snapshot advertises (possibly nothing). */
const toolHistory = (name: string) =>
  fc
    .record({
      versions: fc.uniqueArray(
        fc.record({ edits: editSet, quarantined: fc.boolean(), at: fc.integer({ min: 0, max: 3 }) }),
        { maxLength: 4, selector: (v) => v.edits.join(',') },
      ),
      advertised: fc.oneof(
        fc.constant(null),
        fc.record({ pinnedIndex: fc.nat(3) }),
        fc.record({ edits: editSet }),
      ),
    })
    .map(({ versions, advertised }) => {
      const pinned = versions.map((v) => pin(variant(name, v.edits), v.quarantined, v.at));
      let contract: ToolContract | null = null;
      if (advertised !== null && 'edits' in advertised) contract = variant(name, advertised.edits);
      else if (advertised !== null && versions.length > 0) {
        contract = variant(
          name,
          (versions[advertised.pinnedIndex % versions.length] as { edits: number[] }).edits,
        );
      }
      return { pinned, contract };
    });

const world = fc
  .tuple(...NAMES.map(toolHistory))
  .map((hs) => ({
    pinned: hs.flatMap((h) => h.pinned),
    tools: hs.flatMap((h) => (h.contract === null ? [] : [h.contract])),
  }))
  .chain((w) =>
    fc.record({
      world: fc.constant(w),
      pinnedOrder: fc.shuffledSubarray(w.pinned, { minLength: w.pinned.length, maxLength: w.pinned.length }),
      toolsOrder: fc.shuffledSubarray(w.tools, { minLength: w.tools.length, maxLength: w.tools.length }),
    }),
  );

describe('properties', () => {
  it('(a) quarantine holds exactly the unquarantined pinned versions of drifted tools', () => {
    fc.assert(
      fc.property(world, ({ world: w }) => {
        const report = mustCompare(snapshotOf(w.tools), w.pinned);
        const statusOf = new Map(report.tools.map((t) => [t.tool_name, t.status]));
        const quarantinedPinned = new Set(
          w.pinned.filter((p) => p.quarantined).map((p) => p.tool_contract_sha256),
        );
        for (const d of report.quarantine) {
          expect(quarantinedPinned.has(d)).toBe(false);
          const p = w.pinned.find((x) => x.tool_contract_sha256 === d);
          expect(p).toBeDefined();
          expect(p?.quarantined).toBe(false);
          expect(statusOf.get(p?.contract.tool_name ?? '')).toBe('drifted');
        }
        const expected = sorted(
          w.pinned
            .filter((p) => !p.quarantined && statusOf.get(p.contract.tool_name) === 'drifted')
            .map((p) => p.tool_contract_sha256),
        );
        expect(report.quarantine).toStrictEqual(expected);
        expect(report.tools.flatMap((t) => t.quarantine).sort()).toStrictEqual(expected);
      }),
      RUNS,
    );
  });

  it('(b) the status agrees with whether the advertised digest is pinned', () => {
    fc.assert(
      fc.property(world, ({ world: w }) => {
        const report = mustCompare(snapshotOf(w.tools), w.pinned);
        const advertisedNames = new Set(w.tools.map((t) => t.tool_name));
        for (const t of report.tools) {
          const mine = w.pinned.filter((p) => p.contract.tool_name === t.tool_name);
          const digests = mine.map((p) => p.tool_contract_sha256);
          expect(t.pinned_sha256).toStrictEqual(sorted(digests));
          const matched = mine.find((p) => p.tool_contract_sha256 === t.discovered_sha256);
          switch (t.status) {
            case 'drifted':
              expect(matched).toBeUndefined();
              expect(digests).toContain(t.closest_reviewed_sha256);
              expect(t.changed_fields.length).toBeGreaterThan(0);
              if (mine.some((p) => !p.quarantined)) {
                expect(
                  mine.find((p) => p.tool_contract_sha256 === t.closest_reviewed_sha256)?.quarantined,
                ).toBe(false);
              }
              break;
            case 'matches_reviewed':
            case 'matches_quarantined':
              expect(matched?.quarantined).toBe(t.status === 'matches_quarantined');
              expect(t.quarantine).toEqual([]);
              expect(t.closest_reviewed_sha256).toBeNull();
              break;
            case 'unreviewed':
              expect(mine).toEqual([]);
              expect(advertisedNames.has(t.tool_name)).toBe(true);
              break;
            case 'not_advertised':
              expect(advertisedNames.has(t.tool_name)).toBe(false);
              expect(t.discovered_sha256).toBeNull();
              expect(mine.some((p) => !p.quarantined)).toBe(true);
              break;
          }
        }
        // Every advertised tool has an entry; a pinned tool is missing only when fully quarantined.
        const reported = new Set(report.tools.map((t) => t.tool_name));
        for (const n of advertisedNames) expect(reported.has(n)).toBe(true);
        for (const p of w.pinned) {
          const n = p.contract.tool_name;
          const allQuarantined = w.pinned
            .filter((x) => x.contract.tool_name === n)
            .every((x) => x.quarantined);
          expect(reported.has(n)).toBe(advertisedNames.has(n) || !allQuarantined);
        }
      }),
      RUNS,
    );
  });

  it('(c) the report is independent of the order of the snapshot tools and of the pinned list', () => {
    fc.assert(
      fc.property(world, ({ world: w, pinnedOrder, toolsOrder }) => {
        const a = mustCompare(snapshotOf(w.tools), w.pinned);
        const b = mustCompare(snapshotOf(toolsOrder), pinnedOrder);
        expect(b.tools).toStrictEqual(a.tools);
        expect(b.quarantine).toStrictEqual(a.quarantine);
        const names = a.tools.map((t) => t.tool_name);
        expect(names).toStrictEqual([...names].sort());
        expect(new Set(names).size).toBe(names.length);
        expect(a.quarantine).toStrictEqual([...new Set(a.quarantine)].sort());
      }),
      RUNS,
    );
  });
});
