import { beforeEach, describe, expect, it } from 'vitest';
import { errorPolicy } from '../../src/errors/index.js';
import { providerIds } from '../../src/providers/index.js';
import { postFault, rejectionOf, startRig, useRig } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';
import { Secret } from '../../src/security/secret.js';

/**
 * Failures that arrive raw (not as SDK status errors), for every provider, over real sockets:
 * stall after headers, hang, socket cut mid-body, connection reset, 2xx that is not JSON, caller abort.
 */
describe.each(providerIds)('%s: failures that arrive raw', (provider) => {
  const suite = useRig((emulator) => emulator.resetFaults());
  const key = `test-${provider}-key-0001`;
  beforeEach(async () => {
    // TimelyGPT: have a token cached, so the fault hits llm-completion.
    await suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), openSignal());
  });

  it('a body that stalls after the headers ends in timeout when the deadline signal fires', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'stall', count: 1 });
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), AbortSignal.timeout(300)));
    const failure = suite.rig.adapters[provider].classify(error);
    expect(failure.errorClass).toBe('timeout');
    expect(errorPolicy[failure.errorClass].breaker).toBe('counts');
  });

  it('a request that never gets headers ends in timeout when the deadline signal fires', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'hang', count: 1 });
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), AbortSignal.timeout(300)));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('timeout');
  });

  it('a caller abort while waiting ends in aborted, which never counts', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'stall', count: 1 });
    const controller = new AbortController();
    const call = suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), controller.signal);
    setTimeout(() => controller.abort(), 100);
    const failure = suite.rig.adapters[provider].classify(await rejectionOf(call));
    expect(failure.errorClass).toBe('aborted');
    expect(errorPolicy[failure.errorClass].breaker).toBe('ignored');
  });

  it('a caller abort combined with a deadline (AbortSignal.any) still says aborted', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'hang', count: 1 });
    const controller = new AbortController();
    const call = suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), AbortSignal.any([controller.signal, AbortSignal.timeout(10_000)]));
    setTimeout(() => controller.abort(), 100);
    expect(suite.rig.adapters[provider].classify(await rejectionOf(call)).errorClass).toBe('aborted');
  });

  it('a socket cut mid-body ends in connection', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'cut', count: 1 });
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), openSignal()));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('connection');
  });

  it('a connection reset before any answer ends in connection', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'reset', count: 1 });
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), openSignal()));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('connection');
  });

  it('a 2xx that is not JSON ends in server_error', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'garbage', count: 1 });
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), openSignal()));
    const failure = suite.rig.adapters[provider].classify(error);
    expect(failure.errorClass).toBe('server_error');
    expect(failure.httpStatus).toBe(200);
  });

  it('a 2xx claiming JSON whose body is broken ends in server_error', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'respond', count: 1, status: 200, body: '{"id": "broken', headers: { 'content-type': 'application/json' } });
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), new Secret(key), openSignal()));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('server_error');
  });

  it('nothing listening ends in connection', async () => {
    const closed = await startRig();
    await closed.emulator.close();
    const error = await rejectionOf(closed.adapters[provider].generate(studyRequest(), new Secret(key), openSignal()));
    expect(closed.adapters[provider].classify(error).errorClass).toBe('connection');
  });
});
