"""What the browser tests share besides fixtures: the page watcher, screenshots."""

from pathlib import Path

from playwright.sync_api import ConsoleMessage, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).parent / "artifacts"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


class PageWatch:
    """Collects what must never happen on our pages: dialogs (an XSS firing), console errors, CSP reports."""

    def __init__(self, page: Page):
        self.dialogs: list[str] = []
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        page.on("dialog", self._on_dialog)
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))

    def _on_dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)

    def forgive_http_status(self, *codes: int) -> None:
        """Chromium logs every 4xx response; drop those a test provoked on purpose."""
        provoked = tuple(f"status of {code} " for code in codes)
        self.console_errors = [text for text in self.console_errors if not any(p in text for p in provoked)]

    def assert_clean(self) -> None:
        assert self.dialogs == [], f"a dialog opened (script ran): {self.dialogs}"
        assert self.page_errors == [], f"JavaScript errors: {self.page_errors}"
        csp = [text for text in self.console_errors if "Content Security Policy" in text]
        assert csp == [], f"CSP violations: {csp}"
        assert self.console_errors == [], f"console errors: {self.console_errors}"


def screenshot(page: Page, name: str) -> Path:
    """The whole page. Chromium's full-page capture stretches the viewport behind the page's back, and
    Plotly's responsive charts re-lay themselves out mid-capture; so stretch the viewport ourselves,
    give Plotly its (debounced) resize, capture, and restore."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    viewport = page.viewport_size
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": viewport["width"], "height": height})
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))
    page.set_viewport_size(viewport)
    page.wait_for_timeout(300)
    return path
