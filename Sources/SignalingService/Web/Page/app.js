// The callend page: joins a room over the signaling WebSocket (/ws), calls the peer with
// RTCPeerConnection, shows its video, plays its audio, sends this browser's camera and microphone
// when allowed, and shows live statistics. Plain JavaScript, no build step; served by `callend serve`.
'use strict';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const FINAL = new Set(['bad_room', 'room_full', 'replaced', 'token_malformed', 'token_algorithm', 'token_signature',
  'token_expired', 'token_not_yet_valid', 'token_room', 'token_issuer', 'token_claim_range', 'token_renewal']);

// Everything the page knows, on window for whoever drives it (tests read `callend.stats`).
const state = {
  room: null, token: null, me: null, peer: null, iceServers: [],
  ws: null, pc: null, local: null, remoteSession: null, described: false, pending: [],
  retry: 250, over: false, chain: Promise.resolve(), stats: null, history: [], log: [],
  channels: [], dataLog: [],
};
window.callend = state;

function log(text) {
  state.log.push(`${new Date().toISOString().slice(11, 19)} ${text}`);
  if (state.log.length > 200) state.log.shift();
  $('log').textContent = state.log.slice(-12).join('\n');
}
function status(text) { $('status').textContent = text; log(text); }
function notice(text) { $('notice').textContent = text; log(text); }

let counter = 0;
const uid = () => `${Date.now().toString(36)}-${(counter++).toString(36)}`;
function send(message) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(message));
}
function relay(type, payload) { send({ type, id: uid(), to: state.peer, payload }); }

// --- Local media ----------------------------------------------------------------------------

async function openLocal() {
  if (!window.isSecureContext || !navigator.mediaDevices) {
    notice('This page is not a secure context (it needs HTTPS, or localhost), so the browser gives it no camera or microphone: receiving only.');
    return null;
  }
  const wanted = params.get('send') === 'none' ? [] : [{ audio: true, video: { width: 640, height: 480 } }, { audio: true }, { video: true }];
  let failure = null;
  for (const constraints of wanted) {
    try { return await navigator.mediaDevices.getUserMedia(constraints); } catch (e) { failure = failure || e; }
  }
  notice(failure ? `No camera or microphone (${failure.name}: ${failure.message}): receiving only.` : 'Receiving only (send=none).');
  return null;
}

function showLocal(stream) {
  if (!stream) return;
  const video = $('local');
  if (stream.getVideoTracks().length) { video.srcObject = stream; video.hidden = false; }
  for (const [button, kind, on, off] of [['mute-audio', 'audio', 'Mute microphone', 'Unmute microphone'],
                                          ['mute-video', 'video', 'Stop camera', 'Start camera']]) {
    const track = stream.getTracks().find((t) => t.kind === kind);
    if (!track) continue;
    const b = $(button);
    b.disabled = false;
    b.onclick = () => {
      track.enabled = !track.enabled;
      b.setAttribute('aria-pressed', String(!track.enabled));
      b.textContent = track.enabled ? on : off;
    };
  }
}

// --- Signaling ------------------------------------------------------------------------------

function connect(rejoin) {
  const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`);
  state.ws = ws;
  ws.onopen = () => { state.retry = 250; send({ type: 'join', room: state.room, token: state.token, rejoin }); };
  ws.onmessage = (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch { return; }
    // One message at a time, in order: each may wait on the peer connection.
    state.chain = state.chain.then(() => onMessage(message)).catch((e) => log(`error: ${e}`));
  };
  ws.onclose = () => {
    if (state.over || state.ws !== ws) return;
    const delay = state.retry * (0.5 + Math.random() / 2);
    state.retry = Math.min(state.retry * 2, 10000);
    status(`signaling lost: trying again in ${(delay / 1000).toFixed(1)} s`);
    setTimeout(() => connect(true), delay);
  };
}

async function onMessage(m) {
  if (MESH && await meshMessage(m)) return;
  // While a call runs, only its peer negotiates with it: the others in the room are ignored.
  if (['offer', 'answer', 'candidate', 'bye'].includes(m.type) && state.pc && state.peer && m.from !== state.peer) {
    log(`ignored ${m.type} from ${m.from}, who is not this call's peer ${state.peer}`);
    return;
  }
  switch (m.type) {
    case 'joined':
      state.me = m.participant;
      state.iceServers = m.iceServers || [];
      if (state.pc) { status(`back in ${m.room} as ${m.participant}`); break; }
      if (m.peers.length) {
        state.peer = m.peers[0];
        status(`joined ${m.room} as ${m.participant}: calling ${state.peer}`);
        await offer(false);
      } else {
        status(`joined ${m.room} as ${m.participant}: waiting for a peer`);
      }
      break;
    case 'peer-joined':
      if (state.pc && m.participant !== state.peer) break;  // someone else: the call goes on
      if (!m.rejoin && state.pc) closeCall();
      state.peer = m.participant;
      status(`${m.participant} ${m.rejoin ? 'is back' : 'joined'}`);
      break;
    case 'peer-left':
      status(`${m.participant}'s signaling left (${m.reason}); media goes on while the path works`);
      break;
    case 'offer': await onOffer(m); break;
    case 'answer':
      if (!state.pc || state.pc.signalingState !== 'have-local-offer') break;
      await state.pc.setRemoteDescription({ type: 'answer', sdp: m.payload.sdp });
      state.remoteSession = sessionOf(m.payload.sdp);
      break;
    case 'candidate': {
      if (!state.pc) break;
      const c = m.payload || {};
      const init = c.candidate ? c : { candidate: '', sdpMid: c.sdpMid ?? '0', sdpMLineIndex: c.sdpMLineIndex ?? 0 };
      try { await state.pc.addIceCandidate(init); } catch (e) { log(`candidate not taken: ${e.message}`); }
      break;
    }
    case 'bye':
      closeCall();
      status(`${m.from} hung up`);
      break;
    case 'token':
      state.token = m.token;
      // TURN credentials live as long as the credential: the next ICE restart uses the new ones.
      if (m.iceServers) {
        state.iceServers = m.iceServers;
        if (state.pc) state.pc.setConfiguration({ ...state.pc.getConfiguration(), iceServers: m.iceServers });
      }
      break;
    case 'error':
      log(`service: ${m.code}: ${m.message}`);
      // A renewal takes the seat back only within its grace: after it, the page's own token.
      if ((m.code === 'token_renewal' || m.code === 'token_expired') && state.token !== state.original) {
        state.token = state.original;
        state.ws.close();
        break;
      }
      // A seat held by a live connection frees when that connection ends: try again later.
      if (m.code === 'seat_taken') { state.ws.close(); break; }
      if (FINAL.has(m.code)) { state.over = true; status(`refused: ${m.code}: ${m.message}`); }
      break;
    default: break;  // ack, pong
  }
}

// The o= session id: another id is a new session (the peer came back as a new process).
function sessionOf(sdp) { const m = /^o=\S+ (\d+)/m.exec(sdp); return m ? m[1] : null; }

// --- The data channel console ---------------------------------------------------------------
// The page opens a channel labelled 'callend' (ordered, reliable) and takes the peer's of that
// label: what `callend join --data-socket` bridges to a local socket. `callendData` is for
// whoever drives the page (tests): what came, and sending.

// ?data-label=L and ?data=unreliable (unordered, no retransmissions) change the page's channel.
const DATA_LABEL = params.get('data-label') || 'callend';
const DATA_OPTIONS = params.get('data') === 'unreliable' ? { ordered: false, maxRetransmits: 0 } : {};
window.callendData = {
  received: [], count: 0, bytes: 0, keep: true, peer: [], typed: [],
  open: () => !!openChannel(),
  send: (message) => { const ch = openChannel(); if (!ch) return false; ch.send(message); return true; },
  channel: () => openChannel(),
};

function dataLog(text) {
  state.dataLog.push(text.length > 200 ? `${text.slice(0, 200)}…` : text);
  if (state.dataLog.length > 100) state.dataLog.shift();
  $('data-log').textContent = state.dataLog.slice(-10).join('\n');
}

function openChannel() { return state.channels.find((c) => c.readyState === 'open' && c.label === DATA_LABEL); }

function dataControls() {
  const off = !openChannel();
  $('data-input').disabled = off;
  $('data-send').disabled = off;
}

function wireChannel(ch) {
  ch.binaryType = 'arraybuffer';
  state.channels.push(ch);
  ch.onopen = () => { dataLog(`channel '${ch.label}' open`); dataControls(); };
  ch.onclose = () => {
    state.channels = state.channels.filter((c) => c !== ch);
    dataLog(`channel '${ch.label}' closed`);
    dataControls();
  };
  ch.onmessage = (e) => {
    const d = window.callendData;
    const size = typeof e.data === 'string' ? e.data.length : e.data.byteLength;
    d.count += 1;
    d.bytes += size;
    if (d.keep) d.received.push(e.data);
    if (typeof e.data === 'string' && size <= 1000) dataLog(`${state.peer}: ${e.data}`);
    else dataLog(`${state.peer}: ${size} ${typeof e.data === 'string' ? 'characters' : 'bytes'}`);
  };
  if (ch.readyState === 'open') ch.onopen();
}

function sendConsole(e) {
  e.preventDefault();
  const text = $('data-input').value;
  if (!text || !window.callendData.send(text)) return;
  window.callendData.typed.push(text);
  dataLog(`me: ${text}`);
  $('data-input').value = '';
}

// --- The call -------------------------------------------------------------------------------

function makeCall() {
  const pc = new RTCPeerConnection({
    iceServers: state.iceServers, bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require',
    iceTransportPolicy: params.get('relay') === '1' ? 'relay' : 'all',
  });
  pc.onicecandidate = (e) => {
    const payload = e.candidate ? e.candidate.toJSON() : { candidate: '', sdpMid: '0', sdpMLineIndex: 0 };
    if (state.described) relay('candidate', payload); else state.pending.push(payload);
  };
  pc.ontrack = (e) => {
    const video = $('remote');
    if (!video.srcObject) video.srcObject = new MediaStream();
    video.srcObject.addTrack(e.track);
    video.play().catch((err) => log(`playback: ${err.message}`));
    $('waiting').hidden = true;
  };
  pc.onconnectionstatechange = () => {
    log(`connection ${pc.connectionState}`);
    if (pc.connectionState === 'connected') status(`in a call with ${state.peer}`);
  };
  pc.oniceconnectionstatechange = () => {
    // The offerer restarts ICE when the path fails (callend restarts by itself as well).
    if (pc.iceConnectionState === 'failed' && pc.localDescription && pc.localDescription.type === 'offer') offer(true);
  };
  state.pc = pc;
  state.described = false;
  state.pending = [];
  state.channels = [];
  pc.ondatachannel = (e) => {
    const ch = e.channel;
    window.callendData.peer.push({ label: ch.label, id: ch.id, ordered: ch.ordered, maxRetransmits: ch.maxRetransmits, protocol: ch.protocol });
    wireChannel(ch);
  };
  return pc;
}

function addLocal(pc, offering) {
  for (const kind of ['audio', 'video']) {
    const track = state.local && state.local.getTracks().find((t) => t.kind === kind);
    if (track) pc.addTrack(track, state.local);
    else if (offering) pc.addTransceiver(kind, { direction: 'recvonly' });
  }
  preferVideoCodec(pc);
}

// ?codec=h264 (or vp8): the video sent and received is that codec alone (with its RTX, RED and
// ULPFEC), as a peer that speaks nothing else would have it.
function preferVideoCodec(pc) {
  const wanted = params.get('codec');
  if (!wanted) return;
  const codecs = RTCRtpReceiver.getCapabilities('video').codecs.filter((c) => {
    const name = c.mimeType.split('/')[1].toLowerCase();
    return name === wanted.toLowerCase() || ['rtx', 'red', 'ulpfec'].includes(name);
  });
  for (const t of pc.getTransceivers()) {
    if (t.receiver.track && t.receiver.track.kind === 'video') t.setCodecPreferences(codecs);
  }
}

function describe(description) {
  relay(description.type, { type: description.type, sdp: description.sdp });
  state.described = true;
  for (const payload of state.pending) relay('candidate', payload);
  state.pending = [];
}

async function offer(iceRestart) {
  const pc = state.pc || makeCall();
  // A data channel of our own after the media (its m=application last, the media's mids as
  // before), and the peer's as they come.
  if (!iceRestart) {
    addLocal(pc, true);
    wireChannel(pc.createDataChannel(DATA_LABEL, DATA_OPTIONS));
  }
  await pc.setLocalDescription(await pc.createOffer({ iceRestart }));
  describe(pc.localDescription);
}

async function onOffer(m) {
  const session = sessionOf(m.payload.sdp);
  // A new session, or an offer crossing ours before any answer: start again and answer it.
  if (state.pc && (state.remoteSession === null || state.remoteSession !== session)) closeCall();
  state.peer = m.from;
  const fresh = !state.pc;
  const pc = state.pc || makeCall();
  await pc.setRemoteDescription({ type: 'offer', sdp: m.payload.sdp });
  state.remoteSession = session;
  if (fresh) addLocal(pc, false);
  // Where the offer brought SCTP, a channel of our own beside the peer's.
  if (fresh && /^m=application .*webrtc-datachannel/m.test(m.payload.sdp)) wireChannel(pc.createDataChannel(DATA_LABEL, DATA_OPTIONS));
  await pc.setLocalDescription(await pc.createAnswer());
  describe(pc.localDescription);
}

function closeCall() {
  if (state.pc) state.pc.close();
  state.pc = null;
  state.remoteSession = null;
  state.described = false;
  state.pending = [];
  $('remote').srcObject = null;
  $('waiting').hidden = false;
}

function leave() {
  state.over = true;
  for (const peer of [...mesh.keys()]) { send({ type: 'bye', id: uid(), to: peer, payload: {} }); meshClose(peer); }
  if (state.peer && state.pc) relay('bye', {});
  closeCall();
  if (state.local) state.local.getTracks().forEach((t) => t.stop());
  if (state.ws) state.ws.close();
  $('leave').disabled = true;
  status('left the room');
}

// --- A mesh of up to four (?mesh=1, with serve --max-participants 4 and join --mesh) --------
// A connection and a tile per peer. The newcomer offers to everyone in its `joined` list; those
// present answer. A peer's bye or departure closes its tile only. No data channels here.

const MESH = params.get('mesh') === '1';
const MESH_PEERS = 3;
const mesh = new Map();
window.callendMesh = mesh;

function meshTile(label, stream, muted) {
  const tile = document.createElement('div');
  tile.className = 'tile';
  const video = document.createElement('video');
  video.autoplay = true;
  video.playsInline = true;
  video.muted = muted;
  if (stream) video.srcObject = stream;
  const name = document.createElement('span');
  name.textContent = label;
  tile.append(video, name);
  $('tiles').append(tile);
  return { tile, video };
}

function meshPeer(peer) {
  const pc = new RTCPeerConnection({ iceServers: state.iceServers, bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require',
    iceTransportPolicy: params.get('relay') === '1' ? 'relay' : 'all' });
  const p = { pc, described: false, pending: [], session: null, ...meshTile(peer, new MediaStream(), false) };
  pc.onicecandidate = (e) => {
    const payload = e.candidate ? e.candidate.toJSON() : { candidate: '', sdpMid: '0', sdpMLineIndex: 0 };
    if (p.described) send({ type: 'candidate', id: uid(), to: peer, payload }); else p.pending.push(payload);
  };
  pc.ontrack = (e) => {
    p.video.srcObject.addTrack(e.track);
    p.video.play().catch((err) => log(`playback (${peer}): ${err.message}`));
  };
  pc.onconnectionstatechange = () => log(`${peer}: connection ${pc.connectionState}`);
  mesh.set(peer, p);
  meshStatus();
  return p;
}

function meshDescribe(peer, p, description) {
  send({ type: description.type, id: uid(), to: peer, payload: { type: description.type, sdp: description.sdp } });
  p.described = true;
  for (const payload of p.pending) send({ type: 'candidate', id: uid(), to: peer, payload });
  p.pending = [];
}

function meshClose(peer) {
  const p = mesh.get(peer);
  if (!p) return;
  p.pc.close();
  p.tile.remove();
  mesh.delete(peer);
  meshStatus();
}

function meshStatus() {
  status(mesh.size ? `in ${state.room} with ${[...mesh.keys()].join(', ')}` : `in ${state.room}: waiting for others`);
}

async function meshMessage(m) {
  switch (m.type) {
    case 'joined':
      state.me = m.participant;
      state.iceServers = m.iceServers || [];
      if (!state.meshStarted) {
        state.meshStarted = true;
        $('tiles').hidden = false;
        document.querySelector('.stage').hidden = true;
        if (state.local) meshTile(`${m.participant} (me)`, state.local, true);
      }
      for (const peer of m.peers.filter((x) => !x.startsWith('whep~') && !mesh.has(x)).slice(0, MESH_PEERS)) {
        const p = meshPeer(peer);
        for (const kind of ['audio', 'video']) {
          const track = state.local && state.local.getTracks().find((t) => t.kind === kind);
          if (track) p.pc.addTrack(track, state.local); else p.pc.addTransceiver(kind, { direction: 'recvonly' });
        }
        await p.pc.setLocalDescription(await p.pc.createOffer());
        meshDescribe(peer, p, p.pc.localDescription);
      }
      meshStatus();
      return true;
    case 'peer-joined': log(`${m.participant} joined`); return true;
    case 'peer-left': log(`${m.participant} left (${m.reason})`); meshClose(m.participant); return true;
    case 'bye': log(`${m.from} said bye`); meshClose(m.from); return true;
    case 'offer': {
      const session = sessionOf(m.payload.sdp);
      if (mesh.has(m.from) && mesh.get(m.from).session !== session) meshClose(m.from);  // back as a new session
      if (!mesh.has(m.from) && mesh.size >= MESH_PEERS) { send({ type: 'bye', id: uid(), to: m.from, payload: { reason: 'the mesh is full' } }); return true; }
      const fresh = !mesh.has(m.from);
      const p = mesh.get(m.from) || meshPeer(m.from);
      await p.pc.setRemoteDescription({ type: 'offer', sdp: m.payload.sdp });
      p.session = session;
      if (fresh && state.local) for (const track of state.local.getTracks()) p.pc.addTrack(track, state.local);
      await p.pc.setLocalDescription(await p.pc.createAnswer());
      meshDescribe(m.from, p, p.pc.localDescription);
      return true;
    }
    case 'answer': {
      const p = mesh.get(m.from);
      if (p && p.pc.signalingState === 'have-local-offer') {
        await p.pc.setRemoteDescription({ type: 'answer', sdp: m.payload.sdp });
        p.session = sessionOf(m.payload.sdp);
      }
      return true;
    }
    case 'candidate': {
      const p = mesh.get(m.from);
      if (!p) return true;
      const c = m.payload || {};
      const init = c.candidate ? c : { candidate: '', sdpMid: c.sdpMid ?? '0', sdpMLineIndex: c.sdpMLineIndex ?? 0 };
      try { await p.pc.addIceCandidate(init); } catch (e) { log(`candidate from ${m.from} not taken: ${e.message}`); }
      return true;
    }
    default: return false;
  }
}

// What each tile receives, for whoever drives the page (tests).
window.callendMeshStats = async () => {
  const out = {};
  for (const [peer, p] of mesh) {
    const entry = { connection: p.pc.connectionState, playing: !p.video.paused, framesDecoded: 0, audioPackets: 0 };
    (await p.pc.getStats()).forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'video') Object.assign(entry, { framesDecoded: s.framesDecoded || 0, width: s.frameWidth, height: s.frameHeight, bytesReceived: s.bytesReceived, packetsLost: s.packetsLost });
      if (s.type === 'inbound-rtp' && s.kind === 'audio') entry.audioPackets = s.packetsReceived || 0;
      if (s.type === 'outbound-rtp' && s.kind === 'video') entry.framesSent = s.framesSent || 0;
    });
    out[peer] = entry;
  }
  return { me: state.me, tiles: $('tiles').childElementCount, peers: out };
};

// --- Statistics -----------------------------------------------------------------------------

const previous = new Map();
function rate(key, value, now) {
  const last = previous.get(key);
  previous.set(key, { value, now });
  return last && now > last.now ? (value - last.value) / ((now - last.now) / 1000) : null;
}

async function sample() {
  const pc = state.pc;
  if (!pc) return;
  const report = await pc.getStats();
  const now = performance.now();
  const out = { sent: { bytes: 0 }, recv: { bytes: 0, lost: 0, packets: 0 }, rtt: null, pair: null };
  let pairID = null;
  report.forEach((s) => {
    if (s.type === 'outbound-rtp') {
      out.sent.bytes += s.bytesSent || 0;
      if (s.kind === 'video') Object.assign(out.sent, { fps: s.framesPerSecond, width: s.frameWidth, height: s.frameHeight, frames: s.framesEncoded });
      if (s.kind === 'audio') out.sent.audioPackets = s.packetsSent;
    } else if (s.type === 'inbound-rtp') {
      out.recv.bytes += s.bytesReceived || 0;
      out.recv.lost += s.packetsLost || 0;
      out.recv.packets += s.packetsReceived || 0;
      if (s.kind === 'video') Object.assign(out.recv, { fps: s.framesPerSecond, width: s.frameWidth, height: s.frameHeight, framesDecoded: s.framesDecoded });
      if (s.kind === 'audio') Object.assign(out.recv, { audioSamples: s.totalSamplesReceived, concealedSamples: s.concealedSamples, audioEnergy: s.totalAudioEnergy });
    } else if (s.type === 'remote-inbound-rtp') {
      if (s.kind === 'video' || out.sent.fractionLost === undefined) out.sent.fractionLost = s.fractionLost;
      if (s.roundTripTime !== undefined) out.rtt = s.roundTripTime;
    } else if (s.type === 'transport' && s.selectedCandidatePairId) {
      pairID = s.selectedCandidatePairId;
    }
  });
  const pair = pairID && report.get(pairID);
  if (pair) {
    const local = report.get(pair.localCandidateId), remote = report.get(pair.remoteCandidateId);
    const name = (c) => c ? `${c.candidateType}${c.relayProtocol ? '/' + c.relayProtocol : ''} ${c.address}:${c.port} ${c.protocol}` : '?';
    out.pair = { local: local && local.candidateType, remote: remote && remote.candidateType, text: `${name(local)} ⇄ ${name(remote)}` };
    if (pair.currentRoundTripTime !== undefined) out.rtt = pair.currentRoundTripTime;
  }
  out.sent.bitrate = rate('sent', out.sent.bytes * 8, now);
  out.recv.bitrate = rate('recv', out.recv.bytes * 8, now);
  const lost = rate('lost', out.recv.lost, now), got = rate('got', out.recv.packets, now);
  out.recv.loss = lost !== null && got !== null && lost + got > 0 ? Math.max(0, lost / (lost + got)) : null;
  state.stats = out;
  render(out);
}

const kbps = (b) => (b === null || b === undefined ? '–' : b >= 1e6 ? `${(b / 1e6).toFixed(2)} Mbit/s` : `${Math.round(b / 1e3)} kbit/s`);
const num = (v, digits = 0) => (v === null || v === undefined ? '–' : v.toFixed(digits));
const percent = (v) => (v === null || v === undefined ? '–' : `${(v * 100).toFixed(1)} %`);

function render(s) {
  $('sent-bitrate').textContent = kbps(s.sent.bitrate);
  $('recv-bitrate').textContent = kbps(s.recv.bitrate);
  $('sent-fps').textContent = num(s.sent.fps);
  $('recv-fps').textContent = num(s.recv.fps);
  $('sent-size').textContent = s.sent.width ? `${s.sent.width}×${s.sent.height}` : '–';
  $('recv-size').textContent = s.recv.width ? `${s.recv.width}×${s.recv.height}` : '–';
  $('sent-loss').textContent = percent(s.sent.fractionLost);
  $('recv-loss').textContent = percent(s.recv.loss);
  $('rtt').textContent = s.rtt === null ? '–' : s.rtt < 0.001 ? '< 1 ms' : `${(s.rtt * 1000).toFixed(0)} ms`;
  $('pair').textContent = s.pair ? `path: ${s.pair.text}` : 'no path yet';
  state.history.push([s.sent.bitrate || 0, s.recv.bitrate || 0]);
  if (state.history.length > 60) state.history.shift();
  draw();
}

function draw() {
  const canvas = $('graph'), g = canvas.getContext('2d');
  const w = canvas.width, h = canvas.height, pad = 18;
  g.clearRect(0, 0, w, h);
  const top = Math.max(100e3, ...state.history.flat());
  const style = getComputedStyle(document.documentElement);
  g.fillStyle = style.getPropertyValue('--muted');
  g.font = '20px system-ui, sans-serif';
  g.fillText(kbps(top), 4, pad);
  g.lineWidth = 3;
  for (const [index, color] of [[0, '--sent'], [1, '--recv']]) {
    g.strokeStyle = style.getPropertyValue(color);
    g.beginPath();
    state.history.forEach((point, i) => {
      const x = (i / 59) * w, y = h - 2 - (point[index] / top) * (h - pad - 6);
      if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
    });
    g.stroke();
  }
}

// --- Start ----------------------------------------------------------------------------------

async function start(room, token) {
  state.room = room;
  state.token = token;
  state.original = token;
  // The token is a credential: keep it out of the address bar and history.
  history.replaceState(null, '', `${location.pathname}?room=${encodeURIComponent(room)}`);
  $('join').hidden = true;
  $('call').hidden = false;
  $('room').textContent = room;
  $('leave').onclick = leave;
  $('data-form').onsubmit = sendConsole;
  state.local = await openLocal();
  showLocal(state.local);
  connect(false);
  setInterval(() => send({ type: 'ping' }), 10000);
  setInterval(() => sample().catch((e) => log(`stats: ${e.message}`)), 1000);
  window.addEventListener('pagehide', () => { if (!state.over) leave(); });
}

if (params.get('room') && params.get('token')) {
  start(params.get('room'), params.get('token'));
} else {
  $('join').hidden = false;
  $('room-input').value = params.get('room') || '';
  status('enter a room and a token');
  $('join').onsubmit = (e) => { e.preventDefault(); start($('room-input').value.trim(), $('token-input').value.trim()); };
}
