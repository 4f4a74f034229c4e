import { countedErrorClasses } from '../errors/index.js';
import {
  distinctKeyQuorum,
  doublingOpenPeriod,
  openStrategies,
  type OpenStrategyName,
} from '../machines/breaker-strategy.js';

/**
 * The fleet breaker's transition rules as one Lua script, so that every instance's update of one
 * provider's breaker is applied atomically on the Redis server (no lost counts, no two probes).
 * The rules are the breaker machine's (src/machines/breaker.machine.ts) for the consecutive-failures
 * strategy; time lives in the data: `open` becomes `halfOpen` when `now >= retryAt`, whoever asks.
 * The script is generated from the error table (which classes count: docs/errors.md column B) and from the
 * breaker's open strategy, so the fleet follows a changed row or strategy as the machine does.
 *
 * The open period (`period`) grows as the machine's does: `recoveryMs` when opening from closed,
 * the strategy's next period (doubled, capped at maxRecoveryMs) on a failed probe, reset on closing.
 *
 * The quorum (so that one user's bad key, or one address inventing keys, cannot open a provider): a
 * counted failure adds its voter (its origin's
 * salted id when the call carries one, else its key id: a salted fingerprint, never a key) to the
 * streak's `keys`, which hold at most `quorum` distinct ids; the breaker opens only when the
 * strategy says so AND the streak's keys reach the quorum (BREAKER_MIN_DISTINCT_KEYS). Below it the
 * streak goes on closed; each instance's machine trips the failing key on its own side.
 *
 * KEYS[1] the breaker hash (state, failures, openedAt, retryAt, opens, version, changedAt, period, keys)
 * KEYS[2] the probe lease (SET NX PX: one probe per recovery window), its value `callId|startedAt` (the
 *         probe's start, epoch ms; a value without `|` is a bare call id, start unknown). It is short
 *         (seconds) and the prober renews it (`renew`, only while it still holds it) while its call runs,
 *         so a dead prober's lease lapses within a few seconds and another instance may probe
 * ARGV    op, now, threshold, recoveryMs, callId, leaseMs, channel, maxRecoveryMs, quorum, then for
 *         `merge`: state, failures, openedAt, retryAt, changedAt, period, keys of the local breaker; for
 *         `failed` / `ignored`: the error class, which (when given) decides between the two by the
 *         table's column B, the key id of the call and its origin (empty: none); the streak's voter is
 *         the strategy's (`distinctKeyQuorum.voterLua`: the origin when given, else the key id; neither:
 *         the one voter 'anonymous')
 * Returns state, failures, openedAt, retryAt, opens, version, changedAt, period, keys (the ids joined
 * by spaces), granted, probeStartedAt (-1 = none for times). `probeStartedAt` is the start of the probe
 * whose lease refused this `acquire` (another call's, in flight), so the refused caller can tell how
 * long that probe may still run; -1 for every other operation or when the start is unknown.
 * Every change bumps `version` and is published on `channel` as the fields before `granted` joined by commas.
 */
export function breakerScriptFor(strategy: OpenStrategyName): string {
  const counted = countedErrorClasses.map((errorClass) => `${errorClass} = true`).join(', ');
  return `
local op = ARGV[1]
local now = tonumber(ARGV[2])
local threshold = tonumber(ARGV[3])
local recovery = tonumber(ARGV[4])
local callId = ARGV[5]
local leaseMs = tonumber(ARGV[6])
local channel = ARGV[7]
local maxRecovery = tonumber(ARGV[8]) or recovery
local quorum = tonumber(ARGV[9]) or 1
local counted = { ${counted} }
local function shouldOpen(failures) return ${openStrategies[strategy].lua} end
local function nextPeriod(period) return ${doublingOpenPeriod.lua} end
local function hasQuorum(distinct) return ${distinctKeyQuorum.lua} end
local function voterOf(keyId, origin) return ${distinctKeyQuorum.voterLua} end
if (op == 'failed' or op == 'ignored') and ARGV[10] ~= nil and ARGV[10] ~= '' then
  if counted[ARGV[10]] then op = 'failed' else op = 'ignored' end
end

local h = redis.call('HMGET', KEYS[1], 'state', 'failures', 'openedAt', 'retryAt', 'opens', 'version', 'changedAt', 'period', 'keys')
local exists = h[1] ~= false
local s = {
  state = h[1] or 'closed',
  failures = tonumber(h[2]) or 0,
  openedAt = tonumber(h[3]) or -1,
  retryAt = tonumber(h[4]) or -1,
  opens = tonumber(h[5]) or 0,
  version = tonumber(h[6]) or 0,
  changedAt = tonumber(h[7]) or 0,
  period = tonumber(h[8]) or recovery,
}
local function parseKeys(text)
  local ids = {}
  for id in string.gmatch(text or '', '%S+') do ids[#ids + 1] = id end
  return ids
end
local keys = parseKeys(h[9])
local changed = false
local granted = 0

-- The streak's distinct key ids, at most the quorum of them (enough to know whether it is met).
-- A failure without a key id counts as one key, 'anonymous'.
local function addKey(id)
  if id == nil or id == '' then id = 'anonymous' end
  for _, known in ipairs(keys) do
    if known == id then return end
  end
  if #keys < quorum then keys[#keys + 1] = id end
end

local function become(state)
  if s.state ~= state then
    s.state = state
    s.changedAt = now
  end
  changed = true
end
local function resolveTime()
  if s.state == 'open' and s.retryAt >= 0 and now >= s.retryAt then become('halfOpen') end
end
local function open()
  become('open')
  s.openedAt = now
  s.retryAt = now + s.period
  s.opens = s.opens + 1
  redis.call('DEL', KEYS[2])
end
local function close()
  become('closed')
  s.failures = 0
  keys = {}
  s.openedAt = -1
  s.retryAt = -1
  s.period = recovery
  redis.call('DEL', KEYS[2])
end

resolveTime()
local holder = redis.call('GET', KEYS[2])
local holderId = holder
local holderStart = -1
if holder ~= false then
  local id, started = string.match(holder, '^(.*)|(%d+)$')
  if id ~= nil then
    holderId = id
    holderStart = tonumber(started)
  end
end
local isProbe = holder ~= false and holderId == callId
local probeStartedAt = -1

if op == 'failed' then
  if s.state == 'closed' then
    s.failures = s.failures + 1
    addKey(voterOf(ARGV[11] or '', ARGV[12] or ''))
    changed = true
    if shouldOpen(s.failures) and hasQuorum(#keys) then
      s.period = recovery
      open()
    end
  elseif s.state == 'halfOpen' and isProbe then
    s.period = nextPeriod(s.period)
    open()
  end
elseif op == 'succeeded' then
  if s.state == 'closed' and s.failures > 0 then
    s.failures = 0
    keys = {}
    changed = true
  elseif s.state == 'halfOpen' and isProbe then
    close()
  end
elseif op == 'ignored' then
  if isProbe then redis.call('DEL', KEYS[2]) end
elseif op == 'acquire' then
  if s.state == 'closed' then
    granted = 1
  elseif s.state == 'halfOpen' then
    if redis.call('SET', KEYS[2], callId .. '|' .. ARGV[2], 'NX', 'PX', leaseMs) then
      granted = 1
    elseif holder ~= false then
      probeStartedAt = holderStart
    end
  end
elseif op == 'renew' then
  if isProbe then
    redis.call('PEXPIRE', KEYS[2], leaseMs)
    granted = 1
  end
elseif op == 'reset' or op == 'release' then
  close()
elseif op == 'forceOpen' then
  become('forcedOpen')
  s.openedAt = now
  s.retryAt = -1
  s.opens = s.opens + 1
  redis.call('DEL', KEYS[2])
elseif op == 'merge' then
  -- After an outage: the newer of the local and the fleet state wins; a fresh store takes the local one.
  local localState = ARGV[10]
  local localChangedAt = tonumber(ARGV[14])
  if (not exists) or (localChangedAt > s.changedAt and localState ~= s.state) then
    s.state = localState
    s.failures = tonumber(ARGV[11])
    s.openedAt = tonumber(ARGV[12])
    s.retryAt = tonumber(ARGV[13])
    s.changedAt = localChangedAt
    s.period = tonumber(ARGV[15]) or recovery
    keys = {}
    for _, id in ipairs(parseKeys(ARGV[16])) do addKey(id) end
    changed = true
    redis.call('DEL', KEYS[2])
    resolveTime()
  end
end

local joinedKeys = table.concat(keys, ' ')
local reply = { s.state, s.failures, s.openedAt, s.retryAt, s.opens, s.version, s.changedAt, s.period, joinedKeys }
if changed then
  s.version = s.version + 1
  reply[6] = s.version
  redis.call('HSET', KEYS[1], 'state', s.state, 'failures', s.failures, 'openedAt', s.openedAt,
    'retryAt', s.retryAt, 'opens', s.opens, 'version', s.version, 'changedAt', s.changedAt, 'period', s.period,
    'keys', joinedKeys)
  redis.call('PUBLISH', channel, table.concat(reply, ','))
end
reply[10] = granted
reply[11] = probeStartedAt
return reply
`;
}

/** The script for the default strategy (consecutive counted failures, docs/errors.md "Resilience rules"). */
export const breakerScript = breakerScriptFor('consecutiveFailures');
