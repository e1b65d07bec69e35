/**
 * Contract discovery: compare what a tool server advertises now with the reviewed, pinned
 * contracts (spec ch. 11: "Add contract-discovery snapshot comparison and quarantine on drift";
 * "Why are tool descriptions a supply-chain input?").
 *
 * A tool's live definition is a supply-chain input: a server can change a tool's effect, its
 * capabilities or its limits under the same name. Writ never merges such a change into a pinned
 * contract. Each advertised tool is classified against the contracts pinned for its name:
 * - `matches_reviewed`: its digest is a pinned, unquarantined contract;
 * - `matches_quarantined`: its digest is pinned but quarantined (it stays unusable);
 * - `drifted`: its name is pinned but no pinned contract has its digest. Every unquarantined
 *   contract of that name is listed for quarantine: none of them describes what the executor now
 *   runs. The report names the fields that differ from the closest reviewed contract and whether
 *   the change widens the tool's power (a riskier effect, new capabilities, larger limits, lost
 *   idempotency or reversibility, another resource type);
 * - `unreviewed`: its name is not pinned at all (reported; it cannot be authorized anyway).
 * A pinned tool the snapshot does not advertise is `not_advertised`.
 *
 * Guarantees: deterministic (tools sorted by name, lists sorted; independent of the order of the
 * pinned list), the snapshot's digest is in the report, nothing is pinned or merged. Advertised
 * definitions are shape-checked only: an advertised definition that would fail contract review is
 * still just drift (and quarantines what it replaces). Pinned state whose digest is not its
 * contract's is corrupt storage: `compareDiscovery` throws rather than act on it. A snapshot naming one tool twice is refused ("cannot
 * evaluate"): a server advertising two definitions under one name is not a snapshot to act on.
 * Never: reads a clock, does I/O, or un-quarantines anything.
 */
import { z } from 'zod';
import { canonicalize, digestOf, guardCanonical } from '../canonical/canonical.js';
import { contractDigest } from './contract.js';
import { coreError, type CoreError, fromZodError } from '../errors.js';
import { TOOL_EFFECTS, ToolContract, type ToolEffect } from '../model.js';
import { err, ok, type Result } from '../result.js';
import { Label, strict, UnixMs } from '../schema.js';

/** What a tool server advertised, each tool in Writ's contract form. */
export const DiscoverySnapshot = strict({
  /** Where the definitions came from, e.g. `mcp://deploy-tools tools/list`. */
  source: Label,
  observed_at_unix_ms: UnixMs,
  tools: z.array(ToolContract).max(512),
});
export type DiscoverySnapshot = z.infer<typeof DiscoverySnapshot>;

/** A pinned contract as trusted storage holds it. */
export interface PinnedForDiscovery {
  readonly tool_contract_sha256: string;
  readonly contract: ToolContract;
  readonly quarantined: boolean;
  readonly pinned_at_unix_ms: number;
}

export type DiscoveryStatus =
  'matches_reviewed' | 'matches_quarantined' | 'drifted' | 'unreviewed' | 'not_advertised';

export interface ToolDiscovery {
  readonly tool_name: string;
  readonly status: DiscoveryStatus;
  /** Digest of the advertised definition; `null` when not advertised. */
  readonly discovered_sha256: string | null;
  /** Every pinned contract of this name, sorted. */
  readonly pinned_sha256: readonly string[];
  /** Drift only: the reviewed contract it is closest to (fewest differing fields, then newest). */
  readonly closest_reviewed_sha256: string | null;
  /** Drift only: top-level contract fields that differ from the closest reviewed contract. */
  readonly changed_fields: readonly string[];
  /** Drift only: how the change widens the tool's power relative to that contract. */
  readonly widens: readonly string[];
  /** Drift only: the unquarantined pinned contracts of this name, to be quarantined. */
  readonly quarantine: readonly string[];
}

export interface DiscoveryReport {
  readonly source: string;
  readonly observed_at_unix_ms: number;
  readonly snapshot_sha256: string;
  readonly tools: readonly ToolDiscovery[];
  /** Every digest to quarantine, sorted and unique. */
  readonly quarantine: readonly string[];
}

const EFFECT_RANK: Readonly<Record<ToolEffect, number>> = Object.fromEntries(
  TOOL_EFFECTS.map((e, i) => [e, i]),
) as Record<ToolEffect, number>;

/** Compare a discovery snapshot (taken as `unknown`: it came from outside) with pinned contracts. */
export function compareDiscovery(
  snapshot: unknown,
  pinned: readonly PinnedForDiscovery[],
): Result<DiscoveryReport, CoreError> {
  const parsed = DiscoverySnapshot.safeParse(snapshot);
  if (!parsed.success) return err(fromZodError('invalid_request', 'snapshot', parsed.error));
  const snap = parsed.data;
  const names = snap.tools.map((t) => t.tool_name);
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined) {
    return err(
      coreError('invalid_request', 'snapshot advertises a tool twice', [
        { path: 'snapshot.tools', message: `tool "${duplicate}" appears more than once` },
      ]),
    );
  }
  return guardCanonical(() => ok(compareParsed(snap, pinned)));
}

function compareParsed(snap: DiscoverySnapshot, given: readonly PinnedForDiscovery[]): DiscoveryReport {
  const byName = new Map<string, PinnedForDiscovery[]>();
  for (const p of consistentPinned(given)) {
    const list = byName.get(p.contract.tool_name);
    if (list === undefined) byName.set(p.contract.tool_name, [p]);
    else list.push(p);
  }
  const tools: ToolDiscovery[] = [];
  const advertised = new Set<string>();
  for (const contract of snap.tools) {
    advertised.add(contract.tool_name);
    tools.push(classify(contract, byName.get(contract.tool_name) ?? []));
  }
  for (const [name, list] of byName) {
    if (advertised.has(name) || list.every((p) => p.quarantined)) continue;
    tools.push({
      tool_name: name,
      status: 'not_advertised',
      discovered_sha256: null,
      pinned_sha256: sortedDigests(list),
      closest_reviewed_sha256: null,
      changed_fields: [],
      widens: [],
      quarantine: [],
    });
  }
  tools.sort((a, b) => (a.tool_name < b.tool_name ? -1 : a.tool_name > b.tool_name ? 1 : 0));
  const quarantine = [...new Set(tools.flatMap((t) => t.quarantine))].sort();
  return {
    source: snap.source,
    observed_at_unix_ms: snap.observed_at_unix_ms,
    snapshot_sha256: digestOf(snap),
    tools,
    quarantine,
  };
}

/**
 * Pinned state as trusted storage should hold it: every digest is its contract's digest (else
 * storage is corrupt: this throws, and the adapter fails closed), and one entry per digest, which
 * is quarantined if any copy says so. The result never depends on the order of `pinned`.
 */
function consistentPinned(pinned: readonly PinnedForDiscovery[]): PinnedForDiscovery[] {
  const byDigest = new Map<string, PinnedForDiscovery>();
  for (const p of pinned) {
    if (contractDigest(p.contract) !== p.tool_contract_sha256) {
      throw new Error(`pinned contract ${p.tool_contract_sha256} does not hash to its digest`);
    }
    const seen = byDigest.get(p.tool_contract_sha256);
    if (seen === undefined) byDigest.set(p.tool_contract_sha256, p);
    else {
      byDigest.set(p.tool_contract_sha256, {
        ...seen,
        quarantined: seen.quarantined || p.quarantined,
        pinned_at_unix_ms: Math.max(seen.pinned_at_unix_ms, p.pinned_at_unix_ms),
      });
    }
  }
  return [...byDigest.values()];
}

function classify(contract: ToolContract, pinned: readonly PinnedForDiscovery[]): ToolDiscovery {
  const sha = contractDigest(contract);
  const base = {
    tool_name: contract.tool_name,
    discovered_sha256: sha,
    pinned_sha256: sortedDigests(pinned),
    closest_reviewed_sha256: null,
    changed_fields: [],
    widens: [],
    quarantine: [],
  };
  if (pinned.length === 0) return { ...base, status: 'unreviewed' };
  const same = pinned.find((p) => p.tool_contract_sha256 === sha);
  if (same !== undefined)
    return { ...base, status: same.quarantined ? 'matches_quarantined' : 'matches_reviewed' };
  const reviewed = pinned.filter((p) => !p.quarantined);
  const closest = closestOf(contract, reviewed.length > 0 ? reviewed : pinned);
  return {
    ...base,
    status: 'drifted',
    closest_reviewed_sha256: closest.pinned.tool_contract_sha256,
    changed_fields: closest.fields,
    widens: widening(closest.pinned.contract, contract),
    quarantine: sortedDigests(reviewed),
  };
}

/** The pinned contract with the fewest differing top-level fields; ties go to the newest. */
function closestOf(
  contract: ToolContract,
  candidates: readonly PinnedForDiscovery[],
): { pinned: PinnedForDiscovery; fields: string[] } {
  let best: { pinned: PinnedForDiscovery; fields: string[] } | undefined;
  for (const p of candidates) {
    const fields = changedFields(p.contract, contract);
    if (
      best === undefined ||
      fields.length < best.fields.length ||
      (fields.length === best.fields.length && newer(p, best.pinned))
    ) {
      best = { pinned: p, fields };
    }
  }
  if (best === undefined) throw new Error('closestOf needs at least one candidate');
  return best;
}

function newer(a: PinnedForDiscovery, b: PinnedForDiscovery): boolean {
  return (
    a.pinned_at_unix_ms > b.pinned_at_unix_ms ||
    (a.pinned_at_unix_ms === b.pinned_at_unix_ms && a.tool_contract_sha256 < b.tool_contract_sha256)
  );
}

/** Top-level fields whose canonical forms differ, sorted. */
export function changedFields(reviewed: ToolContract, discovered: ToolContract): string[] {
  const keys = new Set([...Object.keys(reviewed), ...Object.keys(discovered)]);
  const out: string[] = [];
  for (const k of keys) {
    const a = (reviewed as Record<string, unknown>)[k];
    const b = (discovered as Record<string, unknown>)[k];
    if (canonicalize(a ?? null) !== canonicalize(b ?? null)) out.push(k);
  }
  return out.sort();
}

/** How `discovered` has more power or less safety than `reviewed`, sorted. */
export function widening(reviewed: ToolContract, discovered: ToolContract): string[] {
  const out: string[] = [];
  if (EFFECT_RANK[discovered.effect] > EFFECT_RANK[reviewed.effect]) out.push('effect');
  if (discovered.required_capabilities.some((c) => !reviewed.required_capabilities.includes(c))) {
    out.push('required_capabilities');
  }
  if (discovered.max_input_bytes > reviewed.max_input_bytes) out.push('max_input_bytes');
  if (discovered.max_output_bytes > reviewed.max_output_bytes) out.push('max_output_bytes');
  if (discovered.timeout_ms > reviewed.timeout_ms) out.push('timeout_ms');
  if (reviewed.idempotency === 'key_required' && discovered.idempotency !== 'key_required') {
    out.push('idempotency');
  }
  if (reviewed.reversible && !discovered.reversible) out.push('reversible');
  if (canonicalize(discovered.resource) !== canonicalize(reviewed.resource)) out.push('resource');
  return out.sort();
}

function sortedDigests(list: readonly PinnedForDiscovery[]): string[] {
  return list.map((p) => p.tool_contract_sha256).sort();
}
