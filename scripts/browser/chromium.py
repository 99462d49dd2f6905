"""Starts Debian's headless Chromium through chromium-driver and python3-selenium for the pages
the test stages drive (page.py, watch.py, tiles.py): the flags every one of them wants, plus the
caller's. Exits 3 (the stage skips) when selenium is missing or Chromium cannot start."""
import sys

COMMON = ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--mute-audio",
          "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--disable-background-networking",
          "--disable-component-update"]
# A fake camera and microphone, allowed without asking.
FAKE_MEDIA = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]


def start(program, flags=(), page_load_strategy=None, capabilities=None):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError as error:
        print(f"{program}: no selenium: {error}", file=sys.stderr)
        sys.exit(3)
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    if page_load_strategy:
        options.page_load_strategy = page_load_strategy
    for flag in COMMON + list(flags):
        options.add_argument(flag)
    for name, value in (capabilities or {}).items():
        options.set_capability(name, value)
    try:
        return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    except Exception as error:  # Chromium missing, or cannot start here
        print(f"{program}: Chromium cannot start: {str(error).splitlines()[0]}", file=sys.stderr)
        sys.exit(3)


def report_and_quit(driver, result):
    """Prints the page's result as one JSON line and closes Chromium (whatever state it is in)."""
    import json
    print(json.dumps(result), flush=True)
    try:
        driver.quit()
    except Exception:
        pass
