import Signaling

/// The page `callend serve --http` serves: plain HTML, CSS and JavaScript in files of their own
/// (Page/), kept in the binary so that nothing needs installing or building. Opened as
/// `/?room=ROOM&token=TOKEN` it joins at once; without them it asks. The script speaks the signaling protocol over the WebSocket at `/ws`.
public enum WebPage {
    /// Response header fields for the page and its script: a content security policy that allows
    /// only this origin (the WebSocket included), and no referrer, since the token is in the URL.
    public static let securityFields: [(String, String)] = [
        ("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self' blob: mediastream:; connect-src 'self'; frame-ancestors 'none'"),
        ("Referrer-Policy", "no-referrer"),
    ]

    /// Sources/SignalingService/Web/Page/index.html and app.js, built into the binary by SwiftPM; the
    /// browser stage lints them and loads them from `callend serve` in Chromium.
    public static let html = PackageResources.index_html
    public static let script = PackageResources.app_js
}
